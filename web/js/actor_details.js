// The actor details panel (shared by the job view's graph and the actors view) and the node-id ->
// hostname cache it and the tables use to show nodes by name.
//
// Exports: rememberNodes, refreshNodeNames, nodeCell, renderActorDetails, renderPanelMessage.

import {getJson} from './api.js';
import {badge, el, fmtDuration, fmtResources, idCell, kvTable} from './format.js';

// at most every NODE_NAMES_MAX_AGE_MS, by the views that show actors.
const NODE_NAMES_MAX_AGE_MS = 10000;
const nodeNames = {map: new Map(), fetchedMs: 0};

export function rememberNodes(nodes) {
  nodeNames.map = new Map(nodes.filter((n) => n.node_id).map((n) => [n.node_id, n.hostname || '']));
  nodeNames.fetchedMs = Date.now();
}

export async function refreshNodeNames() {
  if (Date.now() - nodeNames.fetchedMs < NODE_NAMES_MAX_AGE_MS) return;
  nodeNames.fetchedMs = Date.now(); // One attempt per period, even if it fails.
  rememberNodes((await getJson('api/nodes')).nodes || []);
}

// A node shown by hostname (full id as tooltip), or by its shortened id if the name is unknown.
export function nodeCell(nodeId, length = 8) {
  const name = nodeId ? nodeNames.map.get(nodeId) : '';
  return name ? el('span', {title: nodeId, text: name}) : idCell(nodeId, length);
}

// Actor details (job view's graph panel and the actors view's panel share this).

export function renderActorDetails(panel, actor, extra) {
  const oldLog = panel.querySelector('.log-tail');
  const scroll = oldLog
    ? {
        top: oldLog.scrollTop,
        atBottom: oldLog.scrollHeight - oldLog.scrollTop - oldLog.clientHeight < 24,
      }
    : {atBottom: true};
  const log = el('pre', {class: 'log log-tail', text: actor.log_tail || '(no output yet)'});
  panel.dataset.actorId = actor.actor_id || '';
  panel.replaceChildren(
    el(
      'div',
      {class: 'panel-head'},
      el('h3', {class: 'details-name', text: actor.name || actor.class_name || actor.actor_id}),
      badge(actor.state),
    ),
    el('div', {class: 'details-class muted', text: actor.class_name || ''}),
    kvTable([
      ['Actor ID', el('span', {class: 'mono wrap', text: actor.actor_id || '–'})],
      ['Node', nodeCell(actor.node_id, 16)],
      ['Address', actor.address || '–'],
      ['PID', actor.pid ?? '–'],
      ['Resources', fmtResources(actor.resources)],
      ['Restarts', actor.num_restarts ?? 0],
      ['Uptime', fmtDuration(actor.uptime_s)],
      ['Job', actor.job_id || '–'],
      actor.status_message ? ['Status', actor.status_message] : null,
    ]),
    ...(extra ? [extra] : []),
    el('h4', {text: 'Log tail'}),
    log,
  );
  if (scroll.atBottom) log.scrollTop = log.scrollHeight;
  else log.scrollTop = scroll.top;
}

export function renderPanelMessage(panel, text, isError) {
  delete panel.dataset.actorId;
  panel.replaceChildren(el('p', {class: isError ? 'error-text' : 'muted', text}));
}
