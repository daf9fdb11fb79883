// Entry point: TensorBoard's plugin_entry.html imports this module and calls render().

import { App } from "./app";
import { injectStyles } from "./styles";

export { howToLog } from "./messages";

declare global {
  interface Window {
    __gradhealth?: App;
  }
}

/** Builds the Gradient Health tab into document.body. */
export function render(): void {
  injectStyles(document);
  const app = new App(document.body);
  window.__gradhealth = app;
  void app.start();
}
