// The head's REST API: fetches with a timeout and errors that name the endpoint, carrying the
// cluster token once the user gave it (login.js); a 401 asks for it (event troupe-token-needed).
//
// Exports: ApiError, request (a Response, throws ApiError), getJson, enc (encodeURIComponent),
// settle (runs several fetches to completion, keeping what succeeded).

import {storedToken} from './login.js';

const REQUEST_TIMEOUT_MS = 10000;

export class ApiError extends Error {
  constructor(path, status, message) {
    super(
      status
        ? `${path}: HTTP ${status}${message ? ` — ${message}` : ''}`
        : `${path}: ${message || 'request failed'}`,
    );
    this.path = path;
    this.status = status;
  }
}

// Fetches `path` (relative to the page, so a head behind a path prefix works too); throws
// ApiError on a network error, a timeout or a non-2xx status.
export async function request(path) {
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), REQUEST_TIMEOUT_MS);
  try {
    const token = storedToken();
    const headers = token ? {Authorization: `Bearer ${token}`} : {};
    const response = await fetch(path, {cache: 'no-store', signal: controller.signal, headers});
    if (!response.ok) {
      let message = '';
      try {
        message = (await response.text()).trim();
        const parsed = JSON.parse(message);
        if (parsed && typeof parsed.error === 'string') message = parsed.error;
      } catch (_) {
        /* Plain-text body, or none. */
      }
      if (response.status === 401) {
        window.dispatchEvent(new CustomEvent('troupe-token-needed', {detail: message}));
      }
      throw new ApiError(path, response.status, message.slice(0, 300));
    }
    return response;
  } catch (e) {
    if (e instanceof ApiError) throw e;
    throw new ApiError(path, 0, e.name === 'AbortError' ? 'timed out' : 'head unreachable');
  } finally {
    clearTimeout(timer);
  }
}

export async function getJson(path) {
  const response = await request(path);
  try {
    return await response.json();
  } catch (e) {
    throw new ApiError(path, response.status, 'response is not JSON');
  }
}

export const enc = encodeURIComponent;

// Runs the fetches in `tasks` ({name: promise}) to completion; returns {name: value or
// undefined}, `errors` ({name: error}) and `error`, the first error (so a view renders what it
// got and still reports the failure).
export async function settle(tasks) {
  const names = Object.keys(tasks);
  const results = await Promise.allSettled(names.map((n) => tasks[n]));
  const out = {error: null, errors: {}};
  results.forEach((r, i) => {
    if (r.status === 'fulfilled') {
      out[names[i]] = r.value;
    } else {
      out.errors[names[i]] = r.reason;
      if (!out.error) out.error = r.reason;
    }
  });
  return out;
}
