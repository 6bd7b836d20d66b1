// Drives the jobsctl dashboard in Debian's headless chromium. tests/tests/dashboard_browser.rs
// prepares Redis, a worker (with wait thresholds) and `jobsctl dashboard`, runs this script,
// then checks Redis.
//
// Environment: DASHBOARD_URL, DASHBOARD_USER, DASHBOARD_PASSWORD, FAILED_UUID (the job that
// failed), EXPECT_PROCESSED and EXPECT_FAILED (last hour's counts), SCREENSHOT (PNG path).
// Exits 0 when every check passed, 1 with the reason otherwise.
import { chromium } from "playwright-core";

const env = (name) => {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set`);
  return value;
};

const TIMEOUT = 15_000;

async function main() {
  const url = env("DASHBOARD_URL");
  const failed = env("FAILED_UUID");
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM ?? "/usr/bin/chromium",
    headless: true,
    args: [
      "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
      "--disable-background-networking", "--disable-component-update", "--disable-sync",
    ],
  });
  try {
    const context = await browser.newContext({
      viewport: { width: 1280, height: 900 },
      httpCredentials: { username: env("DASHBOARD_USER"), password: env("DASHBOARD_PASSWORD") },
    });
    const page = await context.newPage();
    const problems = [];
    page.on("pageerror", (error) => problems.push(`page error: ${error.message}`));
    page.on("console", (message) => {
      if (message.type() === "error") problems.push(`console error: ${message.text()}`);
    });

    // Waits until the element's text is exactly `expected`, naming both on failure.
    const text = async (selector, expected) => {
      try {
        await page.waitForFunction(
          ([sel, exp]) => document.querySelector(sel)?.textContent.trim() === exp,
          [selector, expected],
          { timeout: TIMEOUT },
        );
      } catch (_) {
        const actual = await page.evaluate((sel) => document.querySelector(sel)?.textContent.trim(), selector);
        const status = await page.textContent("#status");
        await page.screenshot({ path: env("SCREENSHOT").replace(/\.png$/, "-failure.png"), fullPage: true });
        throw new Error(`${selector}: expected ${JSON.stringify(expected)}, shown ${JSON.stringify(actual)} (status: ${status}; ${problems.join("; ")})`);
      }
    };
    const rows = (selector) => page.locator(selector).count();

    await page.goto(url);
    // The overview: last hour's counts, running jobs, live workers, failed-job store.
    await text("#processed-hour", env("EXPECT_PROCESSED"));
    await text("#failed-hour", env("EXPECT_FAILED"));
    await text("#running", "1 / 4");
    await text("#workers-count", "1");
    await text("#failed-count", "1");
    const bars = await rows("#chart rect.processed");
    if (bars < 1) throw new Error("the chart shows no processed jobs");

    // Queues.
    await text('#queues tr[data-queue="emails"] td.ready', "0");
    await text('#queues tr[data-queue="emails"] td.delayed', "2");
    await text('#queues tr[data-queue="reports"] td.reserved', "1");
    await text('#queues tr[data-queue="emails"] td.state', "active");
    // Wait thresholds, written by the worker's --wait: idle's old job has waited over its
    // 60 s, so its row is tinted and badged; emails has not reached its 10 minutes.
    await text('#queues tr[data-queue="idle"] td.threshold', "1m 0s");
    await text('#queues tr[data-queue="idle"] td.waited span.long-wait', "long wait");
    await text('#queues tr[data-queue="emails"] td.threshold', "10m 0s");
    const flagged = await page.locator("#queues tr.long-wait").evaluateAll((trs) => trs.map((tr) => tr.dataset.queue));
    if (flagged.join() !== "idle") throw new Error(`rows flagged as waiting too long: ${flagged}`);
    const tint = await page.evaluate(() => getComputedStyle(document.querySelector('#queues tr[data-queue="idle"]')).backgroundColor);
    if (tint !== "rgb(253, 236, 236)") throw new Error(`a long-waiting queue's row is not highlighted: ${tint}`);

    // Batches: the half-done batch, with its progress bar.
    const batch = `#batches tr[data-batch="${env("BATCH_ID")}"]`;
    await page.locator(batch).waitFor({ timeout: TIMEOUT });
    await text(`${batch} td:first-child`, "nightly");
    await text(`${batch} td:nth-child(2)`, "50%");
    const progress = await page.getAttribute(`${batch} .progress`, "aria-valuenow");
    if (progress !== "50") throw new Error(`batch progress bar: ${progress}`);
    const width = await page.evaluate((sel) => document.querySelector(`${sel} .progress .done`).getBoundingClientRect().width
      / document.querySelector(`${sel} .progress`).getBoundingClientRect().width, batch);
    if (Math.abs(width - 0.5) > 0.05) throw new Error(`batch progress bar is ${width} full`);
    await text(`${batch} td:nth-child(6)`, "running");
    // The batch search, and the pager of a listing that fits one page.
    await page.fill("#batches-name", "no such batch");
    await text("#batches tbody", "none");
    await page.fill("#batches-name", "NIGHT");
    await page.locator(batch).waitFor({ timeout: TIMEOUT });
    await page.fill("#batches-name", "");
    await page.waitForFunction(() => ["#batches-older", "#batches-newer"].every((b) => document.querySelector(b).disabled),
      null, { timeout: TIMEOUT });

    // Workers and the recent jobs of the first queue (emails).
    await text("#workers tbody tr td:first-child", "mailer");
    await text("#recent-queue", "emailsidlereports");
    await page.waitForFunction(() => {
      const outcomes = [...document.querySelectorAll("#recent tbody tr td:nth-child(4)")].map((td) => td.textContent);
      return ["done", "failed", "released"].every((o) => outcomes.includes(o));
    }, null, { timeout: TIMEOUT });
    // Filtered by outcome: the failed attempt alone.
    await page.selectOption("#recent-outcome", "failed");
    await page.waitForFunction(() => {
      const outcomes = [...document.querySelectorAll("#recent tbody tr td:nth-child(4)")].map((td) => td.textContent);
      return outcomes.length === 1 && outcomes[0] === "failed";
    }, null, { timeout: TIMEOUT });
    await page.selectOption("#recent-outcome", "");

    // Failed jobs: the list, the search, the detail view.
    const row = `#failed tr[data-uuid="${failed}"]`;
    await page.locator(row).waitFor({ timeout: TIMEOUT });
    await page.fill("#search-job", "noop");
    await text("#failed tbody", "none");
    await page.fill("#search-job", "panic");
    await page.fill("#search-text", "on purpose");
    await page.locator(row).waitFor({ timeout: TIMEOUT });
    await text("#failed-matched", "1 of 1 match");
    await page.fill("#search-job", "");
    await page.fill("#search-text", "");
    // By tag: the failed job carries order:7, shown beside its name.
    await page.fill("#search-tag", "order:8");
    await text("#failed tbody", "none");
    await page.fill("#search-tag", "order:7");
    await page.locator(row).waitFor({ timeout: TIMEOUT });
    await text(`${row} span.tag`, "order:7");
    await page.fill("#search-tag", "");
    // The unfiltered list has rendered: no re-render comes between finding the row and the
    // click on it.
    await text("#failed-matched", "1");
    await page.locator(`${row} td.exception`).click();
    await page.locator("#detail").waitFor({ state: "visible", timeout: TIMEOUT });
    const exception = await page.textContent("#detail-exception");
    if (!exception.includes("panicking on purpose")) throw new Error(`detail exception: ${exception}`);
    const payload = await page.textContent("#detail-payload");
    if (!payload.includes(failed) || !payload.includes('"job": "panic"')) throw new Error(`detail payload: ${payload}`);

    await page.screenshot({ path: env("SCREENSHOT"), fullPage: true });

    // Pause emails so the retried job stays in Redis, then retry the failed job with a click.
    await page.click('#queues tr[data-queue="emails"] button.pause');
    await text('#queues tr[data-queue="emails"] td.state', "paused");
    await text("#notice", "Paused emails.");
    // Workers read the paused queues once a second, in the pipeline that writes their
    // heartbeat: a heartbeat more than a tick after the pause proves the worker has seen it.
    const paused = Date.now();
    const deadline = Date.now() + TIMEOUT;
    for (;;) {
      const heartbeat = await page.evaluate(async () => {
        const workers = await (await fetch("/api/workers")).json();
        return workers.length === 1 ? Date.parse(workers[0].last_heartbeat) : 0;
      });
      if (heartbeat > paused + 1500) break;
      if (Date.now() > deadline) throw new Error("no worker heartbeat after the pause");
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    await page.click(`${row} button.retry`);
    await text("#notice", "Retried 1 job.");
    await text("#failed-count", "0");
    await text("#failed tbody", "none");
    await text('#queues tr[data-queue="emails"] td.ready', "1");
    if (await page.locator("#detail").isVisible()) throw new Error("the detail of a retried job is still open");

    if (problems.length) throw new Error(problems.join("\n"));
    console.log("dashboard browser test: every check passed");
  } finally {
    await browser.close();
  }
}

main().catch((error) => {
  console.error(`dashboard browser test failed: ${error.stack ?? error}`);
  process.exit(1);
});
