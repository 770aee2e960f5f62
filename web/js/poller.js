// Polling: refreshes the mounted view every POLL_MS (never two refreshes at once), slower in a
// background tab, and shows the connection state (#conn-status, #banner).
//
// Exports: POLL_MS, POLL_FINISHED_MS (for views that change rarely), app (the poller's state, also
// window.troupeDashboard = {pollCount, view, lastError, ...}), poll, pollNow, stopPolling.

import {$} from './format.js';
import {ApiError} from './api.js';

export const POLL_MS = 1500;
export const POLL_FINISHED_MS = 5000; // A job that has ended changes rarely.
const POLL_HIDDEN_MS = 10000; // Background tab.

// view: the mounted view ({section, mount(route), unmount(), refresh(), optional pollMs()});
// generation: bumped on each route change, so a poll for an earlier view stops.
export const app = {
  view: null,
  viewName: '',
  timer: null,
  generation: 0,
  pollCount: 0,
  lastError: null,
  busy: false,
  pollAgain: false,
};
window.troupeDashboard = app;

function setConnection(error) {
  const status = $('#conn-status');
  const banner = $('#banner');
  app.lastError = error ? error.message : null;
  if (!error) {
    status.dataset.state = 'live';
    status.querySelector('.conn-text').textContent =
      `live · ${new Date().toLocaleTimeString([], {hour12: false})}`;
    banner.hidden = true;
    return;
  }
  const unreachable = !error.status;
  status.dataset.state = unreachable ? 'down' : 'degraded';
  status.querySelector('.conn-text').textContent = unreachable
    ? 'head unreachable'
    : 'partial data';
  banner.textContent = unreachable
    ? `Cannot reach the head (${error.message}). Showing the last data received; retrying.`
    : `The head answered with an error: ${error.message}`;
  banner.hidden = false;
}

export async function poll(generation) {
  if (generation !== app.generation || app.busy) return;
  app.busy = true;
  let error = null;
  try {
    await app.view.refresh();
  } catch (e) {
    error = e instanceof ApiError ? e : new ApiError('dashboard', 0, e && e.message);
    if (!(e instanceof ApiError)) console.error(e);
  } finally {
    app.busy = false;
  }
  if (generation !== app.generation) {
    // The route changed while this refresh was in flight; poll the new view.
    poll(app.generation);
    return;
  }
  setConnection(error);
  app.pollCount++;
  let delay = app.view.pollMs ? app.view.pollMs() : POLL_MS;
  if (document.hidden) delay = Math.max(delay, POLL_HIDDEN_MS);
  if (app.pollAgain) delay = 0;
  app.pollAgain = false;
  app.timer = setTimeout(() => poll(generation), delay);
}

// Refreshes the current view now (after a user action) instead of at the next tick.
export function pollNow() {
  if (app.busy) {
    app.pollAgain = true; // poll() re-polls as soon as the refresh in flight completes.
    return;
  }
  clearTimeout(app.timer);
  poll(app.generation);
}

// Stops the polling of the current view (before another is mounted); poll(app.generation) resumes.
export function stopPolling() {
  clearTimeout(app.timer);
  app.generation++;
}
