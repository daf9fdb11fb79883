// The TensorBoard page around the tab's iframe. Everything here is optional and
// defensive: the tab also runs alone (dev server, tests), where none of it exists.

interface TfStorage {
  getString(key: string): string | undefined;
  setString(key: string, value: string, options?: { defaultValue?: string; useLocationReplace?: boolean }): void;
}

interface HostWindow extends Window {
  tensorboard?: { tf_storage?: TfStorage };
}

function parentWindow(): HostWindow | null {
  try {
    if (window.parent === window) return null;
    // Throws for a cross-origin parent.
    void window.parent.document;
    return window.parent as HostWindow;
  } catch {
    return null;
  }
}

/** TensorBoard's own URL-hash storage, if the tab sits in a same-origin TensorBoard page. */
export function hostStorage(): TfStorage | null {
  const storage = parentWindow()?.tensorboard?.tf_storage;
  return storage && typeof storage.getString === "function" && typeof storage.setString === "function" ? storage : null;
}

/** TensorBoard's own URL fragment, if the tab sits in a same-origin TensorBoard page; null otherwise. */
export function hostHash(): string | null {
  try {
    return parentWindow()?.location.hash ?? null;
  } catch {
    return null;
  }
}

/** Calls `cb` whenever TensorBoard's own URL fragment changes (a link followed or pasted in its page). */
export function watchHostHash(cb: () => void): void {
  try {
    parentWindow()?.addEventListener("hashchange", cb);
  } catch {
    // A host that refuses listeners: the tab keeps its own state until reloaded.
  }
}

/** Whether TensorBoard itself is in dark mode; null when that cannot be seen. */
export function hostDarkMode(): boolean | null {
  const p = parentWindow();
  if (!p) return null;
  try {
    return p.document.body.classList.contains("dark-mode");
  } catch {
    return null;
  }
}

/** Calls `cb` whenever TensorBoard's dark mode changes. */
export function watchHostDarkMode(cb: (dark: boolean) => void): void {
  const p = parentWindow();
  if (!p) return;
  try {
    new MutationObserver(() => cb(p.document.body.classList.contains("dark-mode"))).observe(p.document.body, {
      attributes: true,
      attributeFilter: ["class"],
    });
  } catch {
    // A host without a body to observe: the media query alone decides.
  }
}

// Message types of TensorBoard's plugin channel (tensorboard/components/experimental/plugin_util).
const DATA_RELOADED = "experimental.DataReloaded";
const RUNS_CHANGED = "experimental.RunsChanged";

interface HostMessage {
  type?: unknown;
  id?: unknown;
  isReply?: unknown;
}

/**
 * Opens TensorBoard's plugin channel: the host takes a MessagePort sent with
 * "experimental.bootstrap" and later broadcasts DataReloaded when the user (or
 * auto-reload) refreshes. Every host message gets the reply the host waits for.
 * Returns false when there is no host to talk to; polling covers that case.
 */
export function connectHost(onReload: (reason: string) => void): boolean {
  if (window.parent === window || typeof MessageChannel === "undefined") return false;
  try {
    const channel = new MessageChannel();
    channel.port1.onmessage = (e: MessageEvent) => {
      let msg: HostMessage;
      try {
        msg = JSON.parse(String(e.data)) as HostMessage;
      } catch {
        return;
      }
      if (!msg || msg.isReply) return;
      if (msg.type === DATA_RELOADED || msg.type === RUNS_CHANGED) onReload(String(msg.type));
      channel.port1.postMessage(JSON.stringify({ type: msg.type, id: msg.id, payload: null, error: null, isReply: true }));
    };
    window.parent.postMessage("experimental.bootstrap", "*", [channel.port2]);
    return true;
  } catch {
    return false;
  }
}
