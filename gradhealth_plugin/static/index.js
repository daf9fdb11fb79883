export function render() { document.body.textContent = "Gradient Health"; }
