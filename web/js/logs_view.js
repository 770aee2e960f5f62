// The logs view (#/logs?actor=ID&stream=stdout|stderr): every worker (actor) the head knows,
// grouped by the node it runs (or last ran) on, each with its stdout and stderr; the selected log
// is read with GET /api/actors/ID/logs?stream=&offset= and followed: each poll appends what was
// written since (the head answers the next offset in X-Log-Offset). Following stops when the
// reader scrolls up and resumes once they scroll back to the bottom.
//
// Exports: logsView (a view; #worker-log carries data-offset, data-following and data-actor-id).

import {nodeCell, rememberNodes} from './actor_details.js';
import {enc, getJson, request, settle} from './api.js';
import {$, badge, el, fmtBytes, idCell} from './format.js';
import {pollNow} from './poller.js';

const LOG_KEEP_CHARS = 1024 * 1024;
const BOTTOM_SLACK_PX = 24;
const STREAMS = ['stdout', 'stderr'];

export const logsView = {
  section: 'view-logs',
  actorId: '',
  stream: 'stdout',
  offset: 0,
  decoder: null,
  following: true,
  more: false, // the last read was a full chunk: read again at once
  actors: [],
  nodes: [],
  listKey: '',

  mount(route) {
    this.token = {};
    this.actorId = route.params.get('actor') || '';
    const stream = route.params.get('stream');
    this.stream = STREAMS.includes(stream) ? stream : 'stdout';
    this.listKey = '';
    this.resetLog();
    const pre = $('#worker-log');
    pre.onscroll = () => {
      // Scrolled up: stop following; back at the bottom: follow again.
      const atBottom = pre.scrollHeight - pre.scrollTop - pre.clientHeight < BOTTOM_SLACK_PX;
      if (atBottom !== this.following) {
        this.following = atBottom;
        this.renderFollowState();
      }
    };
    $('#worker-log-follow').onclick = () => {
      this.following = true;
      pre.scrollTop = pre.scrollHeight;
      this.renderFollowState();
    };
    this.renderHeader();
  },

  unmount() {
    $('#worker-log').onscroll = null;
  },

  resetLog() {
    this.offset = 0;
    this.decoder = new TextDecoder();
    this.following = true;
    this.more = false;
    const pre = $('#worker-log');
    pre.textContent = '';
    pre.dataset.offset = '0';
    pre.dataset.actorId = this.actorId;
    pre.dataset.stream = this.stream;
    this.renderFollowState();
  },

  select(actorId, stream) {
    this.actorId = actorId;
    this.stream = stream;
    history.replaceState(null, '', `#/logs?actor=${enc(actorId)}&stream=${stream}`);
    this.token = {}; // Drop answers for the previous selection.
    this.resetLog();
    this.renderHeader();
    this.renderList();
    pollNow();
  },

  async refresh() {
    const token = this.token;
    const r = await settle({
      actors: getJson('api/actors'),
      nodes: getJson('api/nodes'),
      log: this.actorId ? this.fetchLog(token) : undefined,
    });
    if (token !== this.token) return;
    if (r.nodes) {
      this.nodes = r.nodes.nodes || [];
      rememberNodes(this.nodes);
    }
    if (r.actors) {
      this.actors = r.actors.actors || [];
      this.renderList();
      this.renderHeader();
    }
    if (r.errors.log && r.errors.log.status === 404) {
      $('#worker-log-status').textContent = `The head knows no actor ${this.actorId}.`;
      delete r.errors.log;
    }
    const first = Object.values(r.errors)[0];
    if (first) throw first;
    if (this.more) pollNow(); // More of the log is waiting: read it now.
  },

  // Reads the selected log from `offset` and appends it (streaming UTF-8 decode, so a character
  // split between reads stays whole). A log that shrank (a new incarnation) is read from 0.
  async fetchLog(token) {
    const offset = this.offset;
    const response = await request(
      `api/actors/${enc(this.actorId)}/logs?stream=${this.stream}&offset=${offset}`,
    );
    const buffer = await response.arrayBuffer();
    if (token !== this.token) return;
    const header = Number(response.headers.get('X-Log-Offset'));
    const size = Number(response.headers.get('X-Log-Size'));
    const pre = $('#worker-log');
    if (Number.isFinite(header) && header < offset) {
      this.resetLog();
      pre.append('… (the worker restarted: its new log follows)\n');
      this.more = true;
      return;
    }
    const next = Number.isFinite(header) && header >= offset ? header : offset + buffer.byteLength;
    this.offset = next;
    this.more = buffer.byteLength > 0 && Number.isFinite(size) && next < size;
    pre.dataset.offset = String(next);
    const found = response.headers.get('X-Log-Found') !== '0';
    $('#worker-log-status').textContent = found
      ? `${fmtBytes(Number.isFinite(size) ? size : next)} · ${this.stream}`
      : 'no log yet (the worker has not started on any node)';
    const text = this.decoder.decode(new Uint8Array(buffer), {stream: true});
    if (!text) return;
    pre.append(text);
    if (pre.textContent.length > LOG_KEEP_CHARS) {
      const kept = pre.textContent.slice(-LOG_KEEP_CHARS);
      const tail = kept.slice(kept.indexOf('\n') + 1);
      pre.textContent = `… (earlier output trimmed)\n${tail}`;
    }
    if (this.following) pre.scrollTop = pre.scrollHeight;
  },

  renderFollowState() {
    const pre = $('#worker-log');
    pre.dataset.following = this.following ? '1' : '0';
    const button = $('#worker-log-follow');
    button.hidden = this.following;
    $('#worker-log-mode').textContent = this.following
      ? 'following'
      : 'paused (scrolled up) — scroll to the bottom to follow';
  },

  renderHeader() {
    const head = $('#worker-log-title');
    if (!this.actorId) {
      head.replaceChildren(
        el('span', {class: 'muted', text: 'Select a worker’s stdout or stderr.'}),
      );
      return;
    }
    const a = this.actors.find((x) => x.actor_id === this.actorId);
    head.replaceChildren(
      el('span', {class: 'details-name', text: a ? a.name || a.class_name || a.actor_id : ''}),
      ' ',
      idCell(this.actorId, 12),
      ' ',
      a ? badge(a.state) : null,
      el('span', {class: 'chip', text: this.stream}),
    );
  },

  // Workers grouped by node (alive nodes first, by hostname); actors without a node last.
  renderList() {
    const groups = new Map();
    for (const a of this.actors) {
      const key = a.node_id || '';
      if (!groups.has(key)) groups.set(key, []);
      groups.get(key).push(a);
    }
    const byId = new Map(this.nodes.map((n) => [n.node_id, n]));
    const order = [...groups.keys()].sort((x, y) => {
      if (!x !== !y) return x ? -1 : 1;
      const nx = byId.get(x);
      const ny = byId.get(y);
      return String(nx ? nx.hostname : x).localeCompare(String(ny ? ny.hostname : y));
    });
    const key = JSON.stringify([
      order,
      this.actors.map((a) => [a.actor_id, a.state, a.name]),
      this.actorId,
      this.stream,
    ]);
    if (key === this.listKey) return;
    this.listKey = key;
    const list = $('#worker-list');
    if (!this.actors.length) {
      list.replaceChildren(el('p', {class: 'muted', text: 'No workers yet.'}));
      return;
    }
    list.replaceChildren(
      ...order.map((nodeId) =>
        el(
          'div',
          {class: 'worker-group', dataset: {nodeId}},
          el(
            'div',
            {class: 'worker-group-name'},
            nodeId ? nodeCell(nodeId, 12) : el('span', {class: 'muted', text: 'no node'}),
          ),
          groups
            .get(nodeId)
            .slice()
            .sort((x, y) => String(x.name).localeCompare(String(y.name)))
            .map((a) =>
              el(
                'div',
                {
                  class: `worker-row${a.actor_id === this.actorId ? ' selected' : ''}`,
                  dataset: {actorId: a.actor_id || ''},
                },
                el('span', {class: `dot state-${a.state}`, title: a.state}),
                el('span', {
                  class: 'worker-name',
                  title: `${a.class_name || ''} ${a.actor_id || ''}`,
                  text: a.name || a.class_name || a.actor_id,
                }),
                STREAMS.map((stream) =>
                  el('a', {
                    class: `log-link${a.actor_id === this.actorId && stream === this.stream ? ' active' : ''}`,
                    href: `#/logs?actor=${enc(a.actor_id)}&stream=${stream}`,
                    dataset: {stream},
                    text: stream,
                    onclick: (e) => {
                      e.preventDefault();
                      this.select(a.actor_id, stream);
                    },
                  }),
                ),
              ),
            ),
        ),
      ),
    );
  },
};
