// The job list view (#/jobs): every job the head knows, newest first.
//
// Exports: jobsView (a view), jobDuration, TERMINAL_JOB_STATES.

import {enc, getJson} from './api.js';
import {$, badge, el, emptyRow, fmtDuration, fmtTime, isNum} from './format.js';

export const TERMINAL_JOB_STATES = new Set(['SUCCEEDED', 'FAILED', 'STOPPED']);

export const jobsView = {
  section: 'view-jobs',
  mount() {},
  unmount() {},
  async refresh() {
    const body = await getJson('api/jobs/');
    const jobs = (body.jobs || [])
      .slice()
      .sort((a, b) => (b.submitted_ms || 0) - (a.submitted_ms || 0));
    const tbody = $('#job-table tbody');
    if (!jobs.length) {
      tbody.replaceChildren(
        emptyRow(6, 'No jobs yet. Submit one with `troupe job submit job.yaml`.'),
      );
      return;
    }
    tbody.replaceChildren(
      ...jobs.map((j) =>
        el(
          'tr',
          {
            dataset: {jobId: j.job_id || ''},
            onclick: () => {
              location.hash = `#/jobs/${enc(j.job_id)}`;
            },
          },
          el('td', null, el('a', {class: 'mono', href: `#/jobs/${enc(j.job_id)}`, text: j.job_id})),
          el('td', {text: j.name || '–'}),
          el('td', null, badge(j.status)),
          el('td', {text: fmtTime(j.submitted_ms)}),
          el('td', {class: 'num', text: fmtDuration(jobDuration(j))}),
          el('td', {class: 'wrap', text: j.message || ''}),
        ),
      ),
    );
  },
};

export function jobDuration(j) {
  if (!isNum(j.start_ms) || j.start_ms <= 0) return null;
  const end = isNum(j.end_ms) && j.end_ms > 0 ? j.end_ms : Date.now();
  return (end - j.start_ms) / 1000;
}
