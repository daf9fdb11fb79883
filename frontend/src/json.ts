// Shared by every parser of a route's answer and every place that shows a failure.

/** An error to show to the user; `status` is the HTTP status, 0 when there was none. */
export class ApiError extends Error {
  readonly status: number;
  constructor(message: string, status: number) {
    super(message);
    this.name = "ApiError";
    this.status = status;
  }
}

export function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

export function malformed(what: string): ApiError {
  return new ApiError(`Malformed response: ${what}`, 0);
}

/** What the page says about a failure: the server's words for an ApiError, the error otherwise. */
export function errorText(e: unknown): string {
  if (e instanceof ApiError) return e.message;
  return `Unexpected error: ${e instanceof Error ? e.message : String(e)}`;
}
