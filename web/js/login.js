// Signing in: the head serves a job's records, logs, metrics and graph only to requests that carry
// the cluster token (runtime/dashboard/dashboard_server.h, "Admission"). The token is asked for
// once, kept in this browser's localStorage for this origin, and sent by api.js as
// "Authorization: Bearer ..." on every request.
//
// Where it comes from: the head's <state-dir>/token (`cat /tmp/troupe/token` by default; the
// head's 401 answer names the file, and the form shows that), pasted into the form (#token-form)
// that appears when the head answers 401; or a sign-in link whose hash carries `token=...`
// (`troupe dashboard` prints one for its own, per-process token), which is stored and then
// removed from the address bar.
//
// Exports: storedToken, installLogin (call once, before the first poll).

const KEY = 'troupe.token';

export function storedToken() {
  try {
    return localStorage.getItem(KEY) || '';
  } catch (_) {
    return ''; // Storage disabled: every private request gets 401 and the form shows.
  }
}

function storeToken(token) {
  try {
    if (token) localStorage.setItem(KEY, token);
    else localStorage.removeItem(KEY);
  } catch (_) {
    /* Nothing to keep it in. */
  }
}

// A `token=` parameter in the hash ("#/jobs/x?token=T"): stored, then removed from the URL.
function takeTokenFromHash() {
  const [path, query = ''] = location.hash.split('?');
  const params = new URLSearchParams(query);
  const token = params.get('token');
  if (!token) return;
  storeToken(token);
  params.delete('token');
  const rest = params.toString();
  history.replaceState(null, '', `${location.pathname}${path}${rest ? `?${rest}` : ''}`);
}

// onSignedIn: called after a token was entered (e.g. to poll again at once).
export function installLogin(onSignedIn) {
  takeTokenFromHash();
  const form = document.getElementById('token-form');
  const input = document.getElementById('token-input');
  const why = document.getElementById('token-why');
  const where = document.getElementById('token-where');
  window.addEventListener('troupe-token-needed', (event) => {
    if (!form.hidden) return;
    why.textContent = storedToken()
      ? 'The head refused the token this page has (a new cluster?).'
      : 'Jobs, their logs and metrics need the cluster token.';
    // The head's answer says where the token is ("...; the token is in PATH on the head's machine)").
    const hint = /; ([^;]*)\)$/.exec(event.detail || '');
    where.textContent = hint ? `(${hint[1]})` : '';
    form.hidden = false;
  });
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    const token = input.value.trim();
    if (!token) return;
    storeToken(token);
    input.value = '';
    form.hidden = true;
    onSignedIn();
  });
}
