// The actors view (#/actors?state=&job=): the filterable actor table and its details panel.
//
// Exports: actorsView (a view, plus onFilterChange and renderTable for the filter controls).

import {
  nodeCell,
  refreshNodeNames,
  renderActorDetails,
  renderPanelMessage,
  usageOf,
} from './actor_details.js';
import {enc, getJson, settle} from './api.js';
import {
  $,
  badge,
  el,
  emptyRow,
  fmtBytes,
  fmtDuration,
  fmtPercent,
  fmtResources,
  idCell,
} from './format.js';
import {pollNow} from './poller.js';

export const actorsView = {
  section: 'view-actors',
  state: '',
  job: '',
  text: '',
  selected: null,
  actors: [],
  jobIds: '',
  mount(route) {
    this.token = {};
    this.state = route.params.get('state') || '';
    this.job = route.params.get('job') || '';
    this.selected = null;
    this.actors = [];
    $('#actor-filter-state').value = this.state;
    $('#actor-filter-text').value = this.text;
    const job = $('#actor-filter-job');
    if (this.job && ![...job.options].some((o) => o.value === this.job)) {
      job.append(el('option', {value: this.job, text: this.job}));
    }
    job.value = this.job;
    renderPanelMessage(
      $('#actor-details-panel'),
      'Select an actor to see its details and log tail.',
    );
  },
  unmount() {},
  // Filter changes re-query at once and keep the filters in the URL (shareable links).
  onFilterChange() {
    this.state = $('#actor-filter-state').value;
    this.job = $('#actor-filter-job').value;
    history.replaceState(null, '', `#/actors${this.query()}`);
    pollNow();
  },
  // The actor-table query for the current filters ("?job=...&state=..." or "").
  query() {
    const params = new URLSearchParams();
    if (this.job) params.set('job', this.job);
    if (this.state) params.set('state', this.state);
    const query = params.toString();
    return query ? `?${query}` : '';
  },
  async refresh() {
    const query = this.query();
    const token = this.token;
    const selected = this.selected;
    const r = await settle({
      actors: getJson(`api/actors${query}`),
      jobs: getJson('api/jobs/'),
      details: selected ? getJson(`api/actors/${enc(selected)}`) : undefined,
      nodes: refreshNodeNames(),
    });
    if (token !== this.token) return;
    if (r.jobs) this.renderJobOptions(r.jobs.jobs || []);
    // Answers for filters or a selection changed meanwhile are dropped; pollNow() re-asks.
    if (r.actors && query === this.query()) {
      this.actors = r.actors.actors || [];
      this.renderTable();
    }
    const panel = $('#actor-details-panel');
    if (selected && selected === this.selected) {
      if (r.details) renderActorDetails(panel, r.details);
      else if (r.errors.details && r.errors.details.status === 404) {
        renderPanelMessage(panel, `The head no longer knows actor ${selected}.`, true);
      }
    }
    if (r.error) throw r.error;
  },
  renderJobOptions(jobs) {
    const ids = jobs.map((j) => j.job_id).filter(Boolean);
    if (this.job && !ids.includes(this.job)) ids.push(this.job);
    const key = ids.join('\n');
    if (key === this.jobIds) return; // Leave an open <select> alone when nothing changed.
    this.jobIds = key;
    const select = $('#actor-filter-job');
    const names = new Map(jobs.map((j) => [j.job_id, j.name]));
    select.replaceChildren(
      el('option', {value: '', text: 'All'}),
      ...ids.map((id) =>
        el('option', {value: id, text: names.get(id) ? `${id} (${names.get(id)})` : id}),
      ),
    );
    select.value = this.job;
  },
  renderTable() {
    this.text = $('#actor-filter-text').value.trim().toLowerCase();
    const text = this.text;
    const rows = this.actors.filter(
      (a) =>
        !text ||
        [a.actor_id, a.class_name, a.name].some((f) =>
          String(f || '')
            .toLowerCase()
            .includes(text),
        ),
    );
    $('#actor-count').textContent = `${rows.length} actor${rows.length === 1 ? '' : 's'}`;
    const tbody = $('#actor-table tbody');
    if (!rows.length) {
      tbody.replaceChildren(emptyRow(12, 'No actors match.'));
      return;
    }
    tbody.replaceChildren(
      ...rows.map((a) =>
        el(
          'tr',
          {
            class: a.actor_id === this.selected ? 'selected' : null,
            dataset: {actorId: a.actor_id || '', state: a.state || ''},
            onclick: () => this.select(a.actor_id),
          },
          el('td', null, idCell(a.actor_id, 8)),
          el('td', {text: a.class_name || '–'}),
          el('td', {class: 'name-cell', text: a.name || '–'}),
          el('td', null, badge(a.state)),
          el('td', {class: 'wrap-soft'}, nodeCell(a.node_id)),
          el('td', {class: 'mono', text: a.pid ?? '–'}),
          el('td', {class: 'wrap-soft', text: fmtResources(a.resources)}),
          el('td', {class: 'num', dataset: {col: 'cpu'}, text: fmtPercent(usageOf(a).cpu_percent)}),
          el('td', {class: 'num', dataset: {col: 'rss'}, text: fmtBytes(usageOf(a).rss_bytes)}),
          el('td', {class: 'num', text: a.num_restarts ?? 0}),
          el('td', {class: 'num', text: fmtDuration(a.uptime_s)}),
          el(
            'td',
            {class: 'job-cell', dataset: {col: 'job'}},
            a.job_id
              ? el('a', {
                  href: `#/jobs/${enc(a.job_id)}`,
                  text: a.job_id,
                  onclick: (e) => e.stopPropagation(),
                })
              : '–',
          ),
        ),
      ),
    );
  },
  select(actorId) {
    this.selected = actorId;
    const actor = this.actors.find((a) => a.actor_id === actorId);
    if (actor) renderActorDetails($('#actor-details-panel'), actor);
    this.renderTable();
    pollNow();
  },
};
