// Drives tenbind's dashboard in headless Chromium (Debian's, through
// playwright-core: nothing is downloaded) for
// tests/integration/t48_dashboard_in_a_real_browser.sh, which starts
// tenbind, submits the jobs and passes them in the environment:
//   TENBIN_URL, ADMIN_TOKEN, VIEWER_TOKEN, FOLLOW_ID (a running job that
//   prints lines), VICTIM_ID (a running job to cancel), XSS_ID, XSS_NAME,
//   QUEUED_ID, REPORT_JSON (`tenbin --json report` of this month),
//   ARTIFACTS (where the screenshots go), TENBIN_SOURCE_DIR.
// Prints "ok - ..." or "FAIL - ..." per check; exits 1 when any failed.
import { mkdtempSync, mkdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const env = (k) => {
  if (!process.env[k]) throw new Error(`${k} is not set`);
  return process.env[k];
};
const url = env('TENBIN_URL');
const art = env('ARTIFACTS');
const { chromium } = await import(pathToFileURL(join(env('TENBIN_SOURCE_DIR'),
  'ui/node_modules/playwright-core/index.mjs')).href);
const T = 20000;

let fails = 0;
function check(what, cond, detail) {
  if (cond) console.log(`ok - ${what}`);
  else {
    fails++;
    console.log(`FAIL - ${what}${detail === undefined ? '' : ': ' + detail}`);
  }
}
async function step(what, fn) {
  try { await fn(); } catch (e) { check(what, false, e.message.split('\n')[0]); }
}
// The API as the tests see it, beside the browser.
async function api(path, token) {
  const r = await fetch(url + path, {headers: {Authorization: 'Bearer ' + token}});
  return r.json();
}
const dollars6 = (micro) => (micro < 0 ? '-' : '') + '$' + Math.floor(Math.abs(micro) / 1e6) +
  '.' + String(Math.abs(micro) % 1e6).padStart(6, '0');

mkdirSync(art, {recursive: true});
const profile = mkdtempSync(join(tmpdir(), 'tenbin-chromium-'));
const ctx = await chromium.launchPersistentContext(profile, {
  executablePath: '/usr/bin/chromium', headless: true,
  viewport: {width: 1280, height: 860},
  args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking',
    '--disable-component-update', '--disable-sync', '--no-first-run', '--disable-quic'],
});
const page = ctx.pages()[0] || await ctx.newPage();
const dialogs = [], errors = [];
page.on('dialog', (d) => { dialogs.push(d.message()); d.dismiss().catch(() => {}); });
page.on('pageerror', (e) => errors.push(e.message));
const shot = (name) => page.screenshot({path: join(art, name + '.png'), fullPage: true});
const text = (sel) => page.locator(sel).first().textContent({timeout: T});

try {
  await step('the dashboard asks for a token when auth is on', async () => {
    const r = await page.goto(url + '/ui');
    check('GET /ui lands on /ui/', page.url() === url + '/ui/', page.url());
    check('the page is served with its CSP',
      (r.headers()['content-security-policy'] || '').includes("script-src 'self'"));
    await page.locator('#login').waitFor({state: 'visible', timeout: T});
    await shot('login');
    check('the dashboard asks for a token when auth is on', true);
  });

  await step('the jobs page lists the jobs', async () => {
    await page.fill('#token', env('ADMIN_TOKEN'));
    await page.click('#login button[type=submit]');
    await page.locator('#jobs-table').waitFor({timeout: T});
    const ids = await page.locator('#jobs-table a.job-link').allTextContents();
    check('the jobs page lists the jobs', [env('FOLLOW_ID'), env('QUEUED_ID'), env('XSS_ID')]
      .every((id) => ids.includes(id)), ids.join(','));
    const row = page.locator('#jobs-table tr', {has: page.locator(`a.job-link:text-is("${env('QUEUED_ID')}")`)});
    const cells = await row.locator('td').allTextContents();
    check('a queued job shows its predicted start and reason',
      cells[3] === 'queued' && /in \d+[smh]/.test(cells[7]) && cells[8].length > 0, cells.join(' | '));
    const names = await page.locator('#jobs-table td.job-name').allTextContents();
    check('the XSS job\'s name is shown as text in the list', names.includes(env('XSS_NAME')));
    check('the list holds no element made from a job\'s text', await page.evaluate(() =>
      document.querySelectorAll('#main img, #main script, [onerror]').length) === 0);
    await shot('jobs');
  });

  await step('the jobs filter asks the API', async () => {
    await page.selectOption('#f-state', 'queued');
    await page.waitForFunction(() => [...document.querySelectorAll('#jobs-table td:nth-child(4)')]
      .every((td) => td.textContent === 'queued'), null, {timeout: T});
    check('the state filter shows queued jobs only', true);
    await page.selectOption('#f-state', '');
    await page.waitForFunction((n) => document.querySelectorAll('#jobs-table tbody tr').length >= n,
      5, {timeout: T});
  });

  await step('a job\'s log follows it', async () => {
    await page.click(`#jobs-table a.job-link:text-is("${env('FOLLOW_ID')}")`);
    await page.waitForURL(`**/ui/#/jobs/${env('FOLLOW_ID')}`, {timeout: T});
    await page.waitForFunction(() => /tick \d+/.test(document.getElementById('log')?.textContent || ''),
      null, {timeout: T});
    const last = async () => Math.max(...(await text('#log')).match(/tick (\d+)/g).map((s) => Number(s.slice(5))));
    const first = await last();
    await page.waitForFunction((n) => (document.getElementById('log').textContent.match(/tick (\d+)/g) || [])
      .some((s) => Number(s.slice(5)) >= n), first + 3, {timeout: T});
    check('clicking a job in the list opens it with its log', true);
    check('the log follows the running job', await last() >= first + 3);
    await page.locator('#candidates').waitFor({timeout: T});
    check('the placement shows every candidate\'s terms',
      (await page.locator('#candidates th').allTextContents()).includes('total_micro'));
    check('the events timeline is shown', (await text('#events')).includes('running'));
    await shot('job');
  });

  await step('an XSS job is shown as text', async () => {
    await page.goto(`${url}/ui/#/jobs/${env('XSS_ID')}`);
    await page.waitForFunction(() => (document.getElementById('log')?.textContent || '').includes('</script>'),
      null, {timeout: T});
    check('the XSS job\'s name is shown as text', (await text('#job-name')) === env('XSS_NAME'));
    check('its log is shown as text', (await text('#log')).includes('<script>window.__xss=2</script>'));
    check('its command is shown as text', (await text('#spec')).includes('<script>'));
    const injected = await page.evaluate(() =>
      document.querySelectorAll('#main img, #main script, [onerror]').length);
    check('no element came from the job\'s text', injected === 0, injected);
    check('window.__xss is undefined', await page.evaluate(() => typeof window.__xss) === 'undefined');
    await shot('job-xss');
  });

  await step('an admin cancels a job', async () => {
    await page.goto(`${url}/ui/#/jobs/${env('VICTIM_ID')}`);
    await page.locator('#job-state').waitFor({timeout: T});
    await page.click('#cancel');
    await page.waitForFunction(() => document.getElementById('job-state')?.textContent === 'cancelled',
      null, {timeout: T});
    check('an admin cancels a job and sees it cancelled', true);
    const j = await api('/v1/jobs/' + env('VICTIM_ID'), env('ADMIN_TOKEN'));
    check('the API says the job is cancelled', j.state === 'cancelled', j.state);
  });

  await step('the sites page shows every site', async () => {
    await page.goto(url + '/ui/#/sites');
    await page.locator('.card[data-site="lab"]').waitFor({timeout: T});
    const sites = await page.locator('.card[data-site]').evaluateAll((a) => a.map((n) => n.dataset.site));
    check('the sites page shows every site', ['onprem', 'cloud', 'lab'].every((s) => sites.includes(s)),
      sites.join(','));
    check('capacity is shown by GPU type', (await text('.card[data-site="lab"]')).includes('a10g'));
    await page.locator('.card[data-site="lab"] table').first().waitFor({timeout: T});
    const lab = await text('.card[data-site="lab"]');
    check('a drifted site shows its baseline finding', lab.includes('drifted') &&
      lab.includes('nccl_env') && lab.includes('NCCL_ALGO'), lab);
    check('the reference is at its baseline',
      (await text('.card[data-site="onprem"]')).includes('at_baseline'));
    check('a site never probed says so', (await text('.card[data-site="cloud"]')).includes('never_probed'));
    await shot('sites');
  });

  await step('the datasets page loads', async () => {
    await page.goto(url + '/ui/#/datasets');
    await page.locator('#datasets').waitFor({timeout: T});
    await page.waitForFunction(() => document.getElementById('datasets').childElementCount > 0,
      null, {timeout: T});
    check('the datasets page loads', true);
    const ds = await text('#datasets');
    check('a dataset shows its version and its replica at cloud, complete',
      ds.includes('train') && /cloud\s*[0-9a-f]{12}\s*complete/.test(ds), ds);
    check('with the bytes it moved', /cloud\s*[0-9a-f]{12}\s*complete\s*293\.0 KiB \/ 293\.0 KiB\s*[1-9][0-9.]* KiB/.test(ds), ds);
    await shot('datasets');
  });

  await step('the cost page has the report\'s numbers', async () => {
    await page.goto(url + '/ui/#/cost');
    await page.locator('#cost-totals').waitFor({timeout: T});
    await page.locator('#chart-day canvas').waitFor({timeout: T});
    const total = JSON.parse(env('REPORT_JSON')).total;
    for (const k of ['billed', 'sunk', 'marginal', 'egress']) {
      const shown = await text('#total-' + k);
      check(`the cost chart's ${k} total is the report's`, shown === dollars6(total[k + '_micro']),
        `${shown} vs ${dollars6(total[k + '_micro'])}`);
    }
    check('the cost page counts the report\'s jobs', (await text('#total-jobs')) === String(total.jobs));
    check('money was spent (the check is not of zeros)', total.billed_micro > 0 && total.sunk_micro > 0);
    for (const id of ['chart-project', 'chart-site', 'chart-gpu'])
      check(`the ${id} chart is drawn`, await page.locator(`#${id} canvas`).count() > 0);
    check('a budget has its burn-down and forecast',
      /forecast \$/.test(await text('.card[data-budget="nlp"]')));
    await shot('cost');
  });

  await step('a viewer cannot cancel', async () => {
    await page.click('#signout');
    await page.goto(`${url}/ui/#/jobs/${env('FOLLOW_ID')}`);
    await page.locator('#login').waitFor({state: 'visible', timeout: T});
    await page.fill('#token', env('VIEWER_TOKEN'));
    await page.click('#login button[type=submit]');
    await page.locator('#job-state').waitFor({timeout: T});
    await page.click('#cancel');
    await page.waitForFunction(() => /FORBIDDEN/.test(document.getElementById('action-result').textContent),
      null, {timeout: T});
    const msg = await text('#action-result');
    check('a viewer\'s cancel shows the API\'s 403 message', /role 'viewer' may not POST/.test(msg), msg);
    await page.waitForTimeout(2500);
    check('the page still shows the job running', (await text('#job-state')) === 'running');
    const j = await api('/v1/jobs/' + env('FOLLOW_ID'), env('ADMIN_TOKEN'));
    check('the API says the job still runs', j.state === 'running', j.state);
    await shot('job-viewer');
  });

  check('no script from a job ran (window.__xss)', await page.evaluate(() => typeof window.__xss) === 'undefined');
  check('no dialog opened', dialogs.length === 0, dialogs.join('; '));
  check('the page raised no error', errors.length === 0, errors.join('; '));
} finally {
  await ctx.close();
  rmSync(profile, {recursive: true, force: true});
}
process.exit(fails ? 1 : 0);
