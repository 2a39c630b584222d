// The snapshot viewer in a real browser: Debian's chromium, headless, driven
// by playwright-core (tests/viewer/package.json; run_viewer_test.sh installs
// it). Renders fixture_snapshot.json with tools/gpupool_snapshot_view.py,
// opens the page over file:// and checks that it loads without a console
// error, page error or network request, draws the fixture's segments and
// blocks (counted by their data attributes), groups its leases by call site,
// charts its trace, and that a click on a leased block shows its call site.
// Then the page without a snapshot: its file picker loads the fixture, and
// refuses a snapshot of another version with a message. Then a snapshot
// whose strings hold "</script>" cannot break out of its script element, and
// a minimal snapshot (no optional field, unknown keys and states) draws.
//
//   node tests/viewer/viewer_test.mjs [--screenshot=PATH]
//
// GPUPOOL_VIEWER_SCREENSHOT=PATH also writes a screenshot of the fixture's
// page (the one in docs/images/snapshot_viewer.png). CHROMIUM overrides
// /usr/bin/chromium, PYTHON the python3 that runs the command.
// Exit status: 0 passed, 1 failed, 77 skipped (no chromium or playwright-core).

import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const root = resolve(here, "..", "..");
const fixture = join(here, "fixture_snapshot.json");
const command = join(root, "tools", "gpupool_snapshot_view.py");
const template = join(root, "tools", "viewer", "snapshot_viewer.html");
const chromiumPath = process.env.CHROMIUM || "/usr/bin/chromium";
const python = process.env.PYTHON || "python3";
const screenshotArg = process.argv.find((a) => a.startsWith("--screenshot="));
const screenshot = screenshotArg ? screenshotArg.slice("--screenshot=".length)
                                 : process.env.GPUPOOL_VIEWER_SCREENSHOT || "";

// What fixture_snapshot.json holds (kept in step with it by hand; the test
// also recounts from the JSON so that a drift names itself).
const EXPECT = {
  devices: 2,
  segments: 6,
  blocks: 19,
  states: { leased: 7, free: 5, pending: 1, retiring: 1, graph_pool: 1, held_for_capture: 1, stable: 1, exported: 1, leaked: 1 },
  perDevice: { 0: { segments: 4, blocks: 16 }, 1: { segments: 2, blocks: 3 } },
  siteRows: ["model.cc:118", "train.cc:42", "(call site not recorded)", "loader.cc:31", "optimizer.cc:77"],
  charts: ["0/device", "0/pinned_host", "1/device"],
  traceEvents: 21,
  summary: ["backend sim:cuda", "taken 2025-11-26 14:20:00 UTC", "reserved 68 MiB", "in use 27.5 MiB",
            "segments 6", "blocks 19", "imported 1 MiB", "trace 21 of 4096 events"],
};

function skip(why) {
  console.log(`viewer test: SKIPPED: ${why}`);
  process.exit(77);
}

let failures = 0;
function check(ok, what, detail = "") {
  if (ok) {
    console.log(`  ok   ${what}`);
  } else {
    failures++;
    console.log(`  FAIL ${what}${detail ? `: ${detail}` : ""}`);
  }
}
function equal(actual, expected, what) {
  const a = JSON.stringify(actual), e = JSON.stringify(expected);
  check(a === e, what, a === e ? "" : `got ${a}, expected ${e}`);
}

function render(snapshotPath, pagePath) {
  const run = spawnSync(python, [command, snapshotPath, "-o", pagePath], { encoding: "utf8" });
  if (run.error) throw new Error(`cannot run ${python}: ${run.error.message}`);
  if (run.status !== 0) throw new Error(`${command} exited ${run.status}: ${run.stderr}`);
}

// Recounts the fixture, so that EXPECT and the file cannot drift apart silently.
function countFixture() {
  const snap = JSON.parse(readFileSync(fixture, "utf8"));
  let segments = 0, blocks = 0;
  for (const d of snap.devices) for (const m of d.memory) for (const s of m.segments) { segments++; blocks += s.blocks.length; }
  return { devices: snap.devices.length, segments, blocks, trace: snap.trace.length };
}

// A page that records every console error, page error and request.
async function open(browser, url) {
  const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
  const problems = [];
  page.on("console", (m) => { if (m.type() === "error" || m.type() === "warning") problems.push(`console ${m.type()}: ${m.text()}`); });
  page.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
  page.on("request", (r) => { if (!r.url().startsWith("file:") && !r.url().startsWith("data:")) problems.push(`request: ${r.url()}`); });
  page.on("requestfailed", (r) => problems.push(`request failed: ${r.url()}`));
  await page.goto(url, { waitUntil: "load" });
  return { page, problems };
}

async function fixturePage(browser, work) {
  console.log("fixture page (embedded snapshot):");
  const pagePath = join(work, "fixture.html");
  render(fixture, pagePath);
  const { page, problems } = await open(browser, pathToFileURL(pagePath).href);

  check((await page.title()).startsWith("gpupool snapshot: sim:cuda"), "page title names the backend", await page.title());
  const summary = await page.locator("#summary").innerText();
  for (const part of EXPECT.summary) check(summary.includes(part), `header shows "${part}"`, summary);
  check(await page.locator("#loader").isHidden(), "no file picker when a snapshot is embedded");

  equal(await page.locator("section.device").count(), EXPECT.devices, "devices drawn");
  equal(await page.locator("[data-segment]").count(), EXPECT.segments, "segments drawn");
  equal(await page.locator("[data-block]").count(), EXPECT.blocks, "blocks drawn");
  for (const [state, n] of Object.entries(EXPECT.states))
    equal(await page.locator(`[data-block][data-state="${state}"]`).count(), n, `${state} blocks`);
  for (const [device, n] of Object.entries(EXPECT.perDevice)) {
    const section = page.locator(`section.device[data-device="${device}"]`);
    equal(await section.locator("[data-segment]").count(), n.segments, `device ${device}: segments`);
    equal(await section.locator("[data-block]").count(), n.blocks, `device ${device}: blocks`);
  }
  equal(await page.locator(".badge").allInnerTexts(), ["poisoned"], "the poisoned device is marked");
  equal(await page.locator("[data-legend]").count(), 9, "legend: one entry per state");
  // Every block is visible and at least a few pixels wide, however small.
  const widths = await page.locator("[data-block]").evaluateAll((ns) => ns.map((n) => n.getBoundingClientRect().width));
  check(widths.every((w) => w >= 3), "every block is at least 3 px wide", JSON.stringify(widths));

  const sites = await page.locator("#sites tbody tr td:first-child").allInnerTexts();
  equal(sites, EXPECT.siteRows, "leases by call site, largest first");
  const top = await page.locator("#sites tbody tr").first().locator("td").allInnerTexts();
  equal(top.slice(0, 4), ["model.cc:118", "Forward", "16 MiB", "1"], "top call site row");
  const train = await page.locator("#sites tbody tr").nth(1).locator("td").allInnerTexts();
  equal(train.slice(0, 4), ["train.cc:42", "Step", "8 MiB", "3"], "a call site's leases summed over devices");
  await page.locator("#sites tbody tr").nth(1).click();
  equal(await page.locator(".block.highlight").count(), 3, "clicking a call site outlines its blocks");

  equal(await page.locator("[data-imported]").count(), 1, "imported mappings");
  equal(await page.locator("[data-chart]").evaluateAll((ns) => ns.map((n) => n.dataset.chart)), EXPECT.charts,
        "one trace chart per device and kind");
  equal(await page.locator("[data-chart] svg path.reserved").count(), 3, "reserved lines");
  equal(await page.locator("[data-chart] svg path.in_use").count(), 3, "in-use lines");
  equal(await page.locator("[data-chart] circle[data-op]").count(), EXPECT.traceEvents, "one dot per trace event");
  equal(await page.locator("[data-chart] line.oom").count(), 1, "the out-of-memory event is marked");

  // The click: lease 22, a 512 KiB block in a 20 MiB segment.
  check(await page.locator("#detail-fields").isHidden(), "detail panel empty before a click");
  await page.locator('[data-block][data-lease-id="22"]').click();
  const field = (k) => page.locator(`#detail-fields dd[data-field="${k}"]`).innerText();
  equal(await field("site"), "optimizer.cc:77", "clicked block: call site");
  equal(await field("function"), "Adam::Update", "clicked block: function");
  equal(await field("state"), "leased", "clicked block: state");
  equal(await field("lease_id"), "#22", "clicked block: lease");
  equal(await field("stream"), "0x5", "clicked block: stream");
  equal(await field("bytes"), "512 KiB (524,288 B)", "clicked block: bytes");
  equal(await field("requested_bytes"), "488 KiB (500,000 B), 23.7 KiB rounding", "clicked block: requested bytes");
  equal(await field("address"), "0x7f0001a00000", "clicked block: address (segment + offset)");
  equal(await field("age_ns"), "2 µs", "clicked block: age");
  equal(await page.locator(".block.selected").count(), 1, "the clicked block is outlined");

  // Missing optional fields: a lease without call site or age.
  await page.locator('[data-block][data-lease-id="31"]').click();
  equal(await field("site"), "not recorded", "lease without a call site");
  equal(await page.locator('#detail-fields dd[data-field="age_ns"]').count(), 0, "no age shown when absent");
  await page.locator('[data-block][data-state="exported"]').click();
  equal(await field("name"), "halo_out", "exported block: name");
  equal(await field("importers"), "2", "exported block: importers");
  await page.locator('[data-block][data-state="graph_pool"]').click();
  equal(await field("graph_pool"), "#3", "graph-pool block: pool id");
  await page.locator('[data-block][data-state="pending"]').click();
  equal(await field("pending_events"), "1", "pending block: events");
  // Keyboard: a focused block opens with Enter.
  await page.locator('[data-block][data-lease-id="17"]').focus();
  await page.keyboard.press("Enter");
  equal(await field("site"), "train.cc:42", "Enter on a focused block shows it");

  if (screenshot) {
    await page.locator("#sites tbody tr").nth(1).click(); // clears the outline
    await page.locator('[data-block][data-lease-id="22"]').click();
    await page.screenshot({ path: screenshot, fullPage: true });
    console.log(`  wrote ${screenshot}`);
  }
  equal(problems, [], "no console error, page error or network request");
  await page.close();
}

async function pickerPage(browser, work) {
  console.log("template page (file picker):");
  const { page, problems } = await open(browser, pathToFileURL(template).href);
  check(await page.locator("#loader").isVisible(), "without a snapshot the page offers a file picker");
  check(await page.locator("#content").isHidden(), "nothing drawn before a file is chosen");
  const newer = join(work, "newer.json");
  writeFileSync(newer, JSON.stringify({ ...JSON.parse(readFileSync(fixture, "utf8")), version: 2 }));
  await page.locator("#file").setInputFiles(newer);
  await page.locator("#error").waitFor({ state: "visible" });
  check((await page.locator("#error").innerText()).includes("version 2"), "a snapshot of another version is refused by name");
  await page.locator("#file").setInputFiles(fixture);
  await page.locator("#content").waitFor({ state: "visible" });
  equal(await page.locator("[data-segment]").count(), EXPECT.segments, "picked file: segments drawn");
  equal(await page.locator("[data-block]").count(), EXPECT.blocks, "picked file: blocks drawn");
  check(await page.locator("#error").isHidden(), "the error clears once a good file loads");
  equal(problems, [], "no console error, page error or network request");
  await page.close();
}

async function hostilePage(browser, work) {
  console.log("hostile strings:");
  const snap = JSON.parse(readFileSync(fixture, "utf8"));
  const evil = "</script><script>window.__escaped = 1</script><!--";
  snap.imported[0].name = evil;
  snap.backend = "sim:<b>bold</b>";
  const src = join(work, "hostile.json"), pagePath = join(work, "hostile.html");
  writeFileSync(src, JSON.stringify(snap));
  render(src, pagePath);
  const occurrences = (text, s) => text.split(s).length - 1;
  const html = readFileSync(pagePath, "utf8"), bare = readFileSync(template, "utf8");
  equal([occurrences(html, "</script>"), occurrences(html, "<!--")],
        [occurrences(bare, "</script>"), occurrences(bare, "<!--")],
        "the page holds no </script> or <!-- from the snapshot");
  const { page, problems } = await open(browser, pathToFileURL(pagePath).href);
  equal(await page.evaluate(() => window.__escaped), undefined, "no script of the snapshot runs");
  equal(await page.locator("[data-imported] td").nth(3).innerText(), evil, "the name shows as text");
  check((await page.locator("#summary").innerText()).includes("backend sim:<b>bold</b>"), "the backend shows as text");
  equal(problems, [], "no console error, page error or network request");
  await page.close();
}

// The least a reader may meet: keys of a later version, none of the optional
// ones, an empty device list's neighbour (a device with no memory), the
// trace off.
async function minimalPage(browser, work) {
  console.log("minimal snapshot:");
  const snap = {
    format: "gpupool.snapshot", version: 1, taken_at_unix_ns: 0, backend: "sim:instant", trace_capacity: 0,
    devices: [{ device: 0, poisoned: false, memory: [{ kind: "device", reserved_bytes: 2048, in_use_bytes: 1024,
      largest_free_block_bytes: 1024, segments: [{ address: "0x1000", bytes: 2048, blocks: [
        { offset: 0, bytes: 1024, state: "leased", future_key: { x: 1 } },
        { offset: 1024, bytes: 1024, state: "some_later_state" }] }] }],
      stream_pools: [], event_pools: [] },
      { device: 1, poisoned: false, memory: [], stream_pools: [], event_pools: [] }],
    imported: [], trace: [], a_later_key: true,
  };
  const src = join(work, "minimal.json"), pagePath = join(work, "minimal.html");
  writeFileSync(src, JSON.stringify(snap));
  render(src, pagePath);
  const { page, problems } = await open(browser, pathToFileURL(pagePath).href);
  equal(await page.locator("[data-segment]").count(), 1, "segments drawn");
  equal(await page.locator("[data-block]").count(), 2, "blocks drawn");
  equal(await page.locator('[data-block][data-state="some_later_state"].state-other').count(), 1,
        "a state this viewer does not know is drawn as other");
  await page.locator('[data-block][data-state="leased"]').click();
  equal(await page.locator('#detail-fields dd[data-field="site"]').innerText(), "not recorded", "a lease without its fields");
  equal(await page.locator('#detail-fields dd[data-field="future_key"]').innerText(), '{"x":1}', "an unknown field is listed");
  check((await page.locator("#trace-body").innerText()).includes("The trace was off"), "trace off is said");
  check((await page.locator("#sites-body").innerText()).includes("(call site not recorded)"), "the unknown call site is grouped");
  equal(problems, [], "no console error, page error or network request");
  await page.close();
}

async function main() {
  if (!existsSync(chromiumPath)) skip(`${chromiumPath} not found (Debian: apt-get install chromium)`);
  let chromium;
  try {
    ({ chromium } = await import("playwright-core"));
  } catch (e) {
    skip(`playwright-core cannot be loaded (${e.message.split("\n")[0]}); run tests/viewer/run_viewer_test.sh`);
  }
  const counted = countFixture();
  equal(counted, { devices: EXPECT.devices, segments: EXPECT.segments, blocks: EXPECT.blocks, trace: EXPECT.traceEvents },
        "the fixture holds what this test expects");

  const work = mkdtempSync(join(tmpdir(), "gpupool-viewer-"));
  const browser = await chromium.launch({
    executablePath: chromiumPath,
    headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking"],
    timeout: 120000,
  });
  try {
    console.log(`chromium ${browser.version()}`);
    await fixturePage(browser, work);
    await pickerPage(browser, work);
    await hostilePage(browser, work);
    await minimalPage(browser, work);
  } finally {
    await browser.close();
    rmSync(work, { recursive: true, force: true });
  }
  if (failures) {
    console.log(`viewer test: FAILED (${failures} check(s))`);
    process.exit(1);
  }
  console.log("viewer test: ok");
}

main().catch((e) => {
  console.log(`viewer test: FAILED: ${e.stack || e}`);
  process.exit(1);
});
