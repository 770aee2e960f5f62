// Checks of the dashboard's pages shared by the browser tests (dashboard.test.mjs against the
// fixture or a head, finished_run.test.mjs against `troupe dashboard RUN_DIR`).
//
// Exports: renderingProblems (text a person should never read), checkFinishedRunPage (a finished
// job's page: when it ran, its summary as text and chart, its graph).
import assert from 'node:assert/strict';

const WAIT_MS = 15000; // Bound on every single wait for the page.

// Problems in the rendered text under `selectors` (log <pre>s excepted: they hold the workers'
// own output, and shortened ids): a word "null", "undefined" or "NaN", or a number with more than
// 6 significant digits (a raw double such as 35.032302211808414). Numbers glued to letters or
// dots (hex ids, IP addresses), or to a word by a hyphen (a job id "grpo-short-99303198", whose
// hex suffix is all decimal digits one time in 43), are not numbers here.
export function renderingProblems(page, selectors) {
  return page.evaluate((sels) => {
    const problems = [];
    for (const sel of sels) {
      for (const root of document.querySelectorAll(sel)) {
        const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
        for (let n = walker.nextNode(); n; n = walker.nextNode()) {
          // Log output, and ids (shortened ids are .mono with the full id as title).
          if (n.parentElement && n.parentElement.closest('pre, .mono[title]')) continue;
          const text = n.textContent;
          if (/\b(null|undefined|NaN)\b/.test(text)) problems.push(`${sel}: "${text.trim()}"`);
          for (const m of text.matchAll(/(?<![\w.])(?<!\w-)\d+(?:\.\d+)?(?![\w.])/g)) {
            const digits = m[0].replace('.', '').replace(/^0+/, '');
            if (digits.length > 6) problems.push(`${sel}: ${m[0]} in "${text.trim()}"`);
          }
        }
      }
    }
    return problems;
  }, selectors);
}

// Checks the open page (#/jobs/`id`) of a finished job against its /api/jobs answer (`api`: GET
// as JSON): the header says when it started and how long it ran (its recorded start and end,
// formatted by the page's own format.js, not when the page was opened); the summary is rows of
// text (no raw JSON) with `want`'s accuracy, samples and steps rows (each checked when given) and
// its curve drawn with `want.curvePoints` points; the graph has vertices and no "empty" notice.
// Returns the job.
export async function checkFinishedRunPage(page, api, id, want) {
  const job = await api(`api/jobs/${encodeURIComponent(id)}`);
  assert.ok(
    job.start_ms > 0 && job.end_ms >= job.start_ms,
    `recorded times: ${JSON.stringify({start_ms: job.start_ms, end_ms: job.end_ms})}`,
  );
  await page.locator('#job-summary tr[data-row="samples"]').waitFor({timeout: WAIT_MS});
  const facts = await page.locator('#job-header .job-facts').textContent();
  const expected = await page.evaluate(
    async ([start, end]) => {
      const f = await import('./js/format.js');
      return {started: f.fmtTime(start), ran: f.fmtDuration((end - start) / 1000)};
    },
    [job.start_ms, job.end_ms],
  );
  assert.ok(
    facts.includes(`started ${expected.started}`),
    `"${facts}": not started ${expected.started}`,
  );
  assert.ok(facts.includes(`ran ${expected.ran}`), `"${facts}": not ran ${expected.ran}`);
  const summary = await page.locator('#job-summary').textContent();
  assert.doesNotMatch(summary, /[{}[\]"]/, `the summary shows raw JSON: ${summary}`);
  const row = (key) => page.locator(`#job-summary tr[data-row="${key}"] td`).textContent();
  if (want.accuracy) assert.equal(await row('accuracy'), want.accuracy);
  if (want.samples) assert.equal(await row('samples'), want.samples);
  if (want.steps) assert.equal(await row('steps'), want.steps);
  await page.waitForFunction(
    (n) => {
      const c = document.querySelector('#job-summary .summary-curve');
      return c && Number(c.dataset.points) === n && c.querySelector('canvas');
    },
    want.curvePoints,
    {timeout: WAIT_MS},
  );
  await page.waitForFunction(
    () => window.troupeGraph && window.troupeGraph.nodes().length > 0,
    null,
    {timeout: WAIT_MS},
  );
  assert.ok(await page.locator('#graph-empty').isHidden(), 'the graph says it is empty');
  assert.deepEqual(await renderingProblems(page, ['#job-header', '#job-summary']), []);
  return job;
}
