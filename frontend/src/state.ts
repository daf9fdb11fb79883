// Where the view state lives between visits: this page's URL fragment and, inside
// TensorBoard, TensorBoard's own URL (its plugin storage), so a link reopens the view.

import { decodeState, DEFAULT_STATE, encodeState, fromFragment, KEYS, toFragment } from "./hash";
import type { ViewState } from "./hash";
import { hostHash, hostStorage } from "./host";

const HOST_PREFIX = "p.gradhealth.";

// TensorBoard's URL fragment as the tab last wrote it: any other fragment is a link the user followed.
let writtenHostHash: string | null = null;

/** The state the page opens with: the URL fragment, else TensorBoard's URL, else the defaults. */
export function readState(): ViewState {
  if (location.hash.length > 1) return fromFragment(location.hash);
  return readHostState() ?? { ...DEFAULT_STATE };
}

/** The state TensorBoard's URL holds (its plugin storage); null outside TensorBoard. */
function readHostState(): ViewState | null {
  const storage = hostStorage();
  if (!storage) return null;
  const p: Record<string, string> = {};
  for (const k of KEYS) {
    const v = storage.getString(HOST_PREFIX + k);
    if (typeof v === "string" && v !== "") p[k] = v;
  }
  return decodeState(p);
}

/**
 * The state of a link followed or pasted in TensorBoard's page, once its URL changed; null when the
 * change is the tab's own writing (`persistState`), which the hash-change events of its writes report too.
 */
export function linkedState(): ViewState | null {
  const hash = hostHash();
  if (hash === null || hash === writtenHostHash) return null;
  writtenHostHash = hash;
  return readHostState();
}

/** Writes the state into this page's URL and, inside TensorBoard, into TensorBoard's own URL. */
export function persistState(state: ViewState): void {
  const fragment = toFragment(state);
  try {
    // Absolute: the page's <base href> would resolve a bare "#..." to another path.
    history.replaceState(history.state, "", `${location.pathname}${location.search}${fragment ? `#${fragment}` : ""}`);
  } catch {
    // Sandboxed documents may refuse; the host URL below still works.
  }
  const storage = hostStorage();
  if (!storage) return;
  const encoded = encodeState(state) as Record<string, string | undefined>;
  try {
    for (const k of KEYS) {
      storage.setString(HOST_PREFIX + k, encoded[k] ?? "", { defaultValue: "", useLocationReplace: true });
    }
  } catch {
    // An older TensorBoard without this storage API: the iframe's own URL keeps the state.
  }
  writtenHostHash = hostHash();
}

/** True when two states show the same view. */
export function sameState(a: ViewState, b: ViewState): boolean {
  return toFragment(a) === toFragment(b);
}
