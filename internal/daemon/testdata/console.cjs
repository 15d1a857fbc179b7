// The web console's browser test: Debian's Chromium driven by playwright-core, against a real
// daemon the Go test (webui_test.go, TestWebConsole) started. It logs in, walks the pages, saves a
// screenshot of each, and shows that a change without the cookie, with a bad CSRF token or from
// another site is refused. Its input is the environment; it exits non-zero at the first failure.
"use strict";
const assert = require("node:assert/strict");
const path = require("node:path");
const { chromium } = require("playwright-core");

const base = process.env.UI_URL;          // the daemon, http://127.0.0.1:PORT
const key = process.env.UI_KEY;           // an API key
const session = process.env.UI_SESSION;   // a session with steps
const shots = process.env.UI_SHOTS;       // where the screenshots go
const userDir = process.env.UI_PROFILE;   // a fresh --user-data-dir
const chart = process.env.UI_CHART;       // a heavy session whose second step drew a chart ("" without heavy)
// UI_TIMETRAVEL=1: the session's tier keeps a snapshot per step, so the step pages show variables
// and rewind works; the test then requires them.
const timeTravel = process.env.UI_TIMETRAVEL === "1";
const chartVars = process.env.UI_CHART_VARS === "1"; // the same for the heavy tier
// A session to rewind to its step 1 (nano's, else heavy's; "" where no tier keeps snapshots),
// code to run after it with what it must print, and how many steps it had before.
const rewind = process.env.UI_REWIND_SESSION;
const rewindCode = process.env.UI_REWIND_CODE;
const rewindWant = new RegExp(process.env.UI_REWIND_WANT || ".");
const rewindRows = Number(process.env.UI_REWIND_ROWS || 0);

function step(name) { console.log("step: " + name); }

// varNames lists the names in a step page's variables table.
async function varNames(page) {
  await page.waitForSelector("#variables");
  return page.$$eval("#variables tbody tr td:first-child", (els) => els.map((e) => e.textContent.trim()));
}

async function shot(page, name) {
  const file = path.join(shots, name + ".png");
  await page.screenshot({ path: file, fullPage: true });
  console.log("screenshot: " + file);
}

(async () => {
  const context = await chromium.launchPersistentContext(userDir, {
    executablePath: process.env.AGENTBOX_CHROMIUM || "/usr/bin/chromium",
    headless: true,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
      "--disable-background-networking", "--disable-component-update", "--disable-sync"],
    viewport: { width: 1280, height: 860 },
  });
  const errors = [];
  try {
    const page = context.pages()[0] || await context.newPage();
    // Errors a page logs: a CSP violation, a script error, a missing asset. The refusals this
    // test asks for (401, 403) are expected, and so is the 404 of a step page in a code context
    // the step does not have (by its address only: a missing asset is still an error).
    page.on("console", (m) => {
      if (m.type() !== "error" || /status of 40[13]/.test(m.text())) return;
      if (/status of 404/.test(m.text()) && /[?&]context=nope$/.test(m.location().url || "")) return;
      errors.push(m.text() + " " + (m.location().url || ""));
    });
    page.on("pageerror", (e) => errors.push(String(e)));
    page.setDefaultTimeout(20000);

    step("a page without the cookie goes to the login");
    let res = await page.goto(base + "/ui/sessions");
    assert.match(page.url(), /\/ui\/login\?next=%2Fui%2Fsessions$/);
    const csp = res.headers()["content-security-policy"];
    assert.match(csp, /default-src 'self'/);
    assert.match(csp, /frame-ancestors 'none'/);
    await shot(page, "01-login");

    step("a wrong key is refused");
    await page.fill("#key", "abk_not-a-key");
    await page.click("button[type=submit]");
    await page.waitForSelector(".problem");
    assert.match(await page.textContent(".problem"), /not valid/);

    step("log in");
    await page.fill("#key", key);
    await Promise.all([page.waitForURL(/\/ui\/sessions$/), page.click("button[type=submit]")]);
    const cookies = await context.cookies(base + "/ui/");
    const ui = cookies.find((c) => c.name === "agentbox_ui");
    assert.ok(ui, "no session cookie");
    assert.equal(ui.httpOnly, true);
    assert.equal(ui.sameSite, "Strict");
    assert.ok(!ui.value.includes(key), "the cookie holds the key");
    assert.equal(await page.evaluate(() => document.cookie), "", "a script can read the session cookie");

    step("the sessions page lists the session");
    await page.waitForSelector(`a[href="/ui/sessions/${session}"]`);
    await shot(page, "02-sessions");

    step("open the session");
    await Promise.all([page.waitForURL(new RegExp(`/ui/sessions/${session}$`)), page.click(`a[href="/ui/sessions/${session}"]`)]);
    assert.match(await page.textContent("h1"), new RegExp(session));
    await shot(page, "03-session");

    step("click a step: its code, output and variables");
    await Promise.all([page.waitForURL(/\/steps\/st_/), page.click("ol.steps li:nth-child(2) a.step")]);
    assert.match(await page.textContent("pre.code"), /y = \[i \* i for i in range\(10\)\]/);
    assert.match(await page.textContent("#stdout"), /285/);
    if (timeTravel) {
      await page.waitForSelector("#variables");
      const names = await page.$$eval("#variables tbody tr td:first-child", (els) => els.map((e) => e.textContent.trim()));
      assert.deepEqual(names, ["x", "y"]);
      assert.match(await page.textContent("#variables"), /\[0, 1, 4, 9/);
      assert.match(await page.textContent("#diff"), /\+\s*y/);
      assert.match(await page.textContent("#files"), /squares\.txt/);
      assert.match(await page.textContent("#diff"), /\+\s*file\s*\S*squares\.txt/);
    } else {
      console.log("note: this tier keeps no snapshots here; variables, rewind and the branch are not checked");
    }
    await shot(page, "04-step");

    if (chart) {
      step("a heavy step's chart, inline");
      await page.goto(base + "/ui/sessions/" + chart);
      await Promise.all([page.waitForURL(/\/steps\/st_/), page.click("ol.steps li:nth-child(2) a.step")]);
      const img = await page.waitForSelector(".figures img");
      const width = await img.evaluate((el) => el.complete ? el.naturalWidth : 0);
      assert.ok(width > 100, "the chart did not load: width " + width);
      if (chartVars) {
        await page.waitForSelector("#variables", { timeout: 5000 }).catch(async (e) => {
          await shot(page, "05-chart-failed");
          throw e;
        });
        assert.match(await page.textContent("#variables"), /DataFrame/);
      }
      await shot(page, "05-chart");

      if (chartVars) {
        step("a step run in a code context: the contexts it has, and the other one's variables");
        await page.goto(base + "/ui/sessions/" + chart);
        assert.equal((await page.textContent("ol.steps li:nth-child(3) .tag.ctx")).trim(), "beta", "the timeline does not name the step's context");
        assert.equal(await page.locator("ol.steps li .tag.ctx").count(), 1);
        await shot(page, "05a-context-timeline");
        await Promise.all([page.waitForURL(/\/steps\/st_[^?]*$/), page.click("ol.steps li:nth-child(3) a.step")]);
        const stepURL = page.url();
        await page.waitForSelector("#contexts");
        assert.deepEqual(await page.$$eval("#contexts a", (els) => els.map((e) => e.dataset.context)), ["", "beta"]);
        assert.equal(await page.getAttribute("#contexts a[aria-current=page]", "data-context"), "beta", "the context the step ran in is not the one shown");
        let names = await varNames(page);
        assert.ok(names.includes("label") && names.includes("scores") && !names.includes("df"), "beta's variables: " + names);
        assert.match(await page.textContent("#variables"), /in beta/);
        assert.match(await page.textContent("#context-new"), /beta/);
        await shot(page, "05b-context-beta");
        await Promise.all([page.waitForURL(/\?context=$/), page.click("#contexts a[data-context='']")]);
        assert.equal(await page.getAttribute("#contexts a[aria-current=page]", "data-context"), "");
        names = await varNames(page);
        assert.ok(names.includes("df") && !names.includes("label") && !names.includes("scores"), "the main context's variables: " + names);
        assert.match(await page.textContent("main"), /No variable or file changed/, "a run in beta changed the main context");
        await shot(page, "05c-context-main");

        step("a context the step does not have: the reason, not a server error");
        res = await page.goto(stepURL + "?context=nope");
        assert.equal(res.status(), 404);
        assert.match(await page.textContent(".problem"), /no code context "nope"/);
        assert.match(await page.textContent(".problem"), /beta/);
      }
    }

    if (rewind) {
      step("rewind to step 1, run again: a new branch");
      await page.goto(base + "/ui/sessions/" + rewind);
      await Promise.all([page.waitForURL(/\/steps\/st_/), page.click("ol.steps li:nth-child(1) a.step")]);
      // A rewind whose token was tampered with is refused, and the head stays.
      await page.$eval("#rewind input[name=csrf]", (el) => { el.value = "forged"; });
      page.once("dialog", (d) => d.accept());
      res = await Promise.all([page.waitForNavigation(), page.click("#rewind button")]).then(([r]) => r);
      assert.equal(res.status(), 403);
      await page.goto(base + "/ui/sessions/" + rewind);
      assert.equal(await page.locator("ol.steps li.head").getAttribute("data-step"),
        await page.locator(`ol.steps li:nth-child(${rewindRows})`).getAttribute("data-step"), "the refused rewind moved the head");
      await Promise.all([page.waitForURL(/\/steps\/st_/), page.click("ol.steps li:nth-child(1) a.step")]);
      page.once("dialog", (d) => d.accept());
      await Promise.all([page.waitForURL(new RegExp(`/ui/sessions/${rewind}(\\?done=.*)?$`)), page.click("#rewind button")]);
      assert.match(await page.textContent(".flash"), /rewound to step 1/);
      res = await page.request.post(base + "/v1/sessions/" + rewind + "/run", {
        headers: { Authorization: "Bearer " + key }, data: { code: rewindCode, timeout: 60 } });
      assert.equal(res.status(), 200);
      const out = (await res.json()).stdout;
      assert.match(out, rewindWant, "after the rewind: " + out);
      await page.reload();
      await page.waitForSelector("ol.steps li.lane-1.head");
      assert.equal(await page.locator("ol.steps li").count(), rewindRows + 1);
      await shot(page, "06-branch");

      step("fork a session from step 2");
      await Promise.all([page.waitForURL(/\/steps\/st_/), page.click("ol.steps li:nth-child(2) a.step")]);
      await Promise.all([page.waitForURL(/\/ui\/sessions\/sb_[0-9a-f]+(\?done=.*)?$/), page.click("#fork button")]);
      const forked = page.url().match(/\/ui\/sessions\/(sb_[0-9a-f]+)/)[1];
      assert.notEqual(forked, rewind);
      assert.match(await page.textContent(".flash"), /forked from/);
      assert.match(await page.textContent("dl.facts"), new RegExp(`Forked from\\s*${rewind}/st_`));
      res = await page.request.post(base + "/v1/sessions/" + forked + "/run", {
        headers: { Authorization: "Bearer " + key }, data: { code: rewindCode, timeout: 60 } });
      assert.equal(res.status(), 200);
      await shot(page, "07-fork");

      if (await page.locator("form[action$='/pause'] button").count()) {
        step("pause and resume");
        await page.goto(base + "/ui/sessions/" + rewind);
        await Promise.all([page.waitForURL(new RegExp(`/ui/sessions/${rewind}(\\?done=.*)?$`)), page.click("form[action$='/pause'] button")]);
        assert.match(await page.textContent(".pagehead .state"), /paused/);
        await page.goto(base + "/ui/sessions");
        assert.match(await page.textContent(`tr:has(a[href="/ui/sessions/${rewind}"]) .state`), /paused/);
        await shot(page, "08-paused");
        await page.goto(base + "/ui/sessions/" + rewind);
        await Promise.all([page.waitForURL(new RegExp(`/ui/sessions/${rewind}(\\?done=.*)?$`)), page.click("form[action$='/resume'] button")]);
        assert.match(await page.textContent(".pagehead .state"), /live/);
      }
    } else {
      console.log("note: no tier here keeps snapshots: the rewind is not checked");
    }

    step("the audit log and its verification");
    await Promise.all([page.waitForURL(/\/ui\/audit$/), page.click("header nav a[href='/ui/audit']")]);
    await page.waitForSelector("#verification.ok");
    assert.match(await page.textContent("#verification"), /Verified/);
    await Promise.all([page.waitForURL(/\/ui\/audit$/), page.click("#verification button")]);
    await page.waitForSelector("#verification.ok");
    await shot(page, "09-audit");

    step("a change with a bad CSRF token is refused, and changes nothing");
    await page.goto(base + "/ui/sessions");
    await page.$eval("form[action='/ui/logout'] input[name=csrf]", (el) => { el.value = "forged-token"; });
    res = await Promise.all([page.waitForNavigation(), page.click("form[action='/ui/logout'] button")]).then(([r]) => r);
    assert.equal(res.status(), 403);
    assert.match(await page.textContent("main"), /CSRF token/);
    await shot(page, "10-refused-csrf");
    res = await page.goto(base + "/ui/sessions");
    assert.equal(res.status(), 200, "the refused logout logged the person out");
    assert.match(page.url(), /\/ui\/sessions$/);
    const token = await page.$eval("form[action='/ui/logout'] input[name=csrf]", (el) => el.value);
    res = await page.request.post(base + "/ui/audit/verify", { form: { csrf: "forged" }, maxRedirects: 0 });
    assert.equal(res.status(), 403);
    res = await page.request.post(base + "/ui/audit/verify", { form: {}, maxRedirects: 0 });
    assert.equal(res.status(), 403);

    step("a form posted from another site is refused, even with the right token");
    const evil = await context.newPage();
    await evil.setContent(`<form method="post" action="${base}/ui/logout"><input name="csrf" value="${token}"><button>go</button></form>`);
    res = await Promise.all([evil.waitForNavigation(), evil.click("button")]).then(([r]) => r);
    assert.ok(res.status() === 403 || res.status() === 401, "cross-site post answered " + res.status());
    await evil.close();
    res = await page.goto(base + "/ui/sessions");
    assert.equal(res.status(), 200, "the cross-site post logged the person out");

    step("a request without the cookie is refused");
    const anon = await chromium.launch({ executablePath: process.env.AGENTBOX_CHROMIUM || "/usr/bin/chromium", headless: true,
      args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"] });
    const other = await anon.newContext();
    res = await other.request.post(base + "/ui/logout", { form: { csrf: token }, maxRedirects: 0 });
    assert.equal(res.status(), 401);
    res = await other.request.get(base + "/ui/sessions/" + session, { maxRedirects: 0 });
    assert.equal(res.status(), 303);
    assert.match(res.headers()["location"], /^\/ui\/login/);
    await anon.close();

    step("log out");
    await Promise.all([page.waitForURL(/\/ui\/login$/), page.click("form[action='/ui/logout'] button")]);
    res = await page.goto(base + "/ui/sessions");
    assert.match(page.url(), /\/ui\/login/);

    assert.deepEqual(errors, [], "the pages logged errors (a CSP violation shows here)");
    console.log("console test: ok");
  } finally {
    await context.close();
  }
})().catch((e) => { console.error(e); process.exit(1); });
