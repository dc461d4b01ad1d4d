// kafkaguard console: a small script over the REST API (no build step). Credentials live in memory only.
"use strict";

const RESOURCE_TYPES = ["TOPIC", "GROUP", "CLUSTER", "TRANSACTIONAL_ID", "DELEGATION_TOKEN", "USER"];
const OPERATIONS = ["ALL", "READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE", "CLUSTER_ACTION",
  "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "IDEMPOTENT_WRITE", "CREATE_TOKENS", "DESCRIBE_TOKENS", "AUTO_CREATE"];
const ENUMS = {
  resourceTypes: RESOURCE_TYPES,
  patternTypes: ["LITERAL", "PREFIXED"],
  operations: OPERATIONS,
  // what a request asks for: never ALL (an ACL's ALL matches every operation; no request asks for ALL)
  requestOperations: OPERATIONS.filter((name) => name !== "ALL"),
  permissions: ["ALLOW", "DENY"],
  filterResourceTypes: ["ANY", ...RESOURCE_TYPES],
  filterPatternTypes: ["ANY", "MATCH", "LITERAL", "PREFIXED"],
  filterOperations: ["ANY", ...OPERATIONS],
  filterPermissions: ["ANY", "ALLOW", "DENY"],
};

let auth = null; // "Basic ..." header value
let user = null;

const $ = (selector) => document.querySelector(selector);

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (key === "class") node.className = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value);
  }
  for (const child of children) node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  return node;
}

function say(id, text, kind) {
  const node = document.getElementById(id);
  node.textContent = text || "";
  node.className = "message" + (kind ? " " + kind : "");
}

function basic(name, password) {
  const bytes = new TextEncoder().encode(name + ":" + password);
  let binary = "";
  for (const b of bytes) binary += String.fromCharCode(b);
  return "Basic " + btoa(binary);
}

class ApiError extends Error {
  constructor(status, message) { super(message); this.status = status; }
}

async function api(method, path, body) {
  const headers = { "Authorization": auth, "X-Kafkaguard-Console": "1" };
  const init = { method, headers };
  if (body !== undefined) { headers["Content-Type"] = "application/json"; init.body = JSON.stringify(body); }
  const response = await fetch(path, init);
  const text = await response.text();
  const data = text ? JSON.parse(text) : null;
  if (!response.ok) {
    let message = data && (data.message || data.detail) || response.statusText;
    if (Array.isArray(message)) message = message.map((d) => d.msg).join("; ");
    if (response.status === 401) message = "Not logged in: " + message;
    if (response.status === 403) message = "Not allowed: " + message;
    throw new ApiError(response.status, message);
  }
  return data;
}

function formObject(form) {
  const out = {};
  for (const [key, value] of new FormData(form).entries()) if (value !== "") out[key] = value;
  return out;
}

// A select with data-placeholder starts unchosen (and is required): no default grants anything by one click.
// data-default names the option chosen first.
function fillSelects() {
  for (const select of document.querySelectorAll("select[data-enum]")) {
    if (select.dataset.placeholder) {
      select.append(el("option", { value: "", disabled: "", selected: "" }, select.dataset.placeholder));
    }
    for (const name of ENUMS[select.dataset.enum]) select.append(el("option", { value: name }, name));
    if (select.dataset.default) select.value = select.dataset.default;
  }
}

// ------------------------------------------------------------------------------------------------ login

async function login(event) {
  event.preventDefault();
  const name = $("#login-user").value;
  auth = basic(name, $("#login-password").value);
  say("login-message", "Checking…");
  try {
    await api("GET", "/api/acls");
    user = name;
    $("#login-password").value = "";
    $("#login-view").hidden = true;
    $("#tabs").hidden = false;
    $("#whoami").hidden = false;
    $("#whoami-name").textContent = "User:" + name;
    say("login-message", "");
    show("acls");
  } catch (error) {
    auth = null;
    say("login-message", error.status === 401 ? "Wrong user name or password." : error.message, "error");
  }
}

function logout() {
  auth = null; user = null;
  stopDenialsTimer();
  for (const view of document.querySelectorAll(".view")) view.hidden = true;
  $("#tabs").hidden = true; $("#whoami").hidden = true; $("#login-view").hidden = false;
}

function show(tab) {
  for (const button of document.querySelectorAll("#tabs button")) button.classList.toggle("active", button.dataset.tab === tab);
  for (const name of ["acls", "users", "why", "access", "history", "denials"]) document.getElementById(name + "-view").hidden = name !== tab;
  if (tab !== "denials") stopDenialsTimer();
  if (tab === "acls") loadAcls();
  if (tab === "users") loadUsers();
  if (tab === "access") loadGroups();
  if (tab === "history") loadHistory();
  if (tab === "denials") { loadDenials(); syncDenialsTimer(); }
}

// ------------------------------------------------------------------------------------------------- ACLs

function aclCells(acl) {
  return [
    el("td", {}, el("code", {}, acl.principal)),
    el("td", {}, el("code", {}, acl.host)),
    el("td", {}, acl.resource_type + " ", el("code", {}, acl.resource_name)),
    el("td", {}, acl.pattern_type),
    el("td", {}, acl.operation),
    el("td", {}, el("span", { class: "pill " + acl.permission_type }, acl.permission_type)),
  ];
}

async function loadAcls() {
  const query = new URLSearchParams(formObject($("#filter-form")));
  for (const [key, value] of [...query.entries()]) if (value === "ANY") query.delete(key);
  try {
    const data = await api("GET", "/api/acls" + (query.toString() ? "?" + query : ""));
    const body = $("#acl-table tbody");
    body.replaceChildren();
    for (const acl of data.acls) {
      const remove = el("button", { type: "button", class: "danger", onclick: () => deleteAcl(acl) }, "Delete");
      body.append(el("tr", { "data-id": acl.id }, ...aclCells(acl), el("td", {}, remove)));
    }
    const allow = data.acls.filter((a) => a.permission_type === "ALLOW").length;
    $("#acl-count").textContent = data.count;
    $("#acl-breakdown").textContent = data.count ? `${allow} allow · ${data.count - allow} deny` : "";
    $("#acl-empty").hidden = data.count !== 0;
    say("acl-list-message", "");
  } catch (error) {
    say("acl-list-message", error.message, "error");
  }
}

async function addAcl(event) {
  event.preventDefault();
  try {
    const data = await api("POST", "/api/acls", formObject(event.target));
    const result = data.results[0];
    if (result.ok) {
      say("add-message", `Added: ${describe(result.acl)}`, "ok");
      event.target.querySelector("[name=resource_name]").value = "";
      // the next ACL is chosen again: an ALL or an ALLOW never carries over to it unnoticed
      for (const name of ["operation", "permission_type"]) event.target.querySelector(`[name=${name}]`).value = "";
      loadAcls();
    } else {
      say("add-message", "Refused: " + result.error, "error");
    }
  } catch (error) {
    say("add-message", error.message, "error");
  }
}

function describe(acl) {
  return `${acl.permission_type} ${acl.operation} on ${acl.resource_type}:${acl.pattern_type}:${acl.resource_name} ` +
    `for ${acl.principal} from ${acl.host}`;
}

async function deleteAcl(acl) {
  if (!window.confirm("Delete this ACL?\n" + describe(acl))) return;
  const filter = { ...acl };
  delete filter.id;
  try {
    const data = await api("DELETE", "/api/acls", filter);
    await loadAcls();
    say("acl-list-message", `Deleted ${data.count} ACL(s): ${data.deleted.map(describe).join("; ")}`, "ok");
  } catch (error) {
    say("acl-list-message", error.message, "error");
  }
}

// ------------------------------------------------------------------------------------------------ users

async function loadUsers() {
  try {
    const data = await api("GET", "/api/users");
    const body = $("#user-table tbody");
    body.replaceChildren();
    for (const u of data.users) {
      const creds = u.credentials.map((c) => el("span", { class: "pill mech" }, `${c.mechanism} · ${c.iterations}`));
      const remove = el("button", { type: "button", class: "danger", onclick: () => deleteUser(u.name) }, "Delete");
      body.append(el("tr", {}, el("td", {}, u.name), el("td", {}, el("code", {}, "User:" + u.name)),
        el("td", {}, ...creds), el("td", {}, remove)));
    }
    $("#user-count").textContent = data.count;
    say("users-message", "");
  } catch (error) {
    say("users-message", error.message, "error");
  }
}

async function setPassword(event) {
  event.preventDefault();
  const form = formObject(event.target);
  const mechanisms = form.mechanism === "both" ? ["SCRAM-SHA-256", "SCRAM-SHA-512"] : [form.mechanism];
  try {
    for (const mechanism of mechanisms) {
      await api("PUT", "/api/users/" + encodeURIComponent(form.name),
        { mechanism, iterations: Number(form.iterations), password: form.password });
    }
    say("password-message", `Password set for User:${form.name} (${mechanisms.join(", ")}).`, "ok");
    event.target.querySelector("[name=password]").value = "";
    loadUsers();
  } catch (error) {
    say("password-message", error.message, "error");
  }
}

async function deleteUser(name) {
  if (!window.confirm(`Delete every SCRAM credential of User:${name}?`)) return;
  try {
    await api("DELETE", "/api/users/" + encodeURIComponent(name));
    await loadUsers();
    say("users-message", `Deleted User:${name}.`, "ok");
  } catch (error) {
    say("users-message", error.message, "error");
  }
}

// ------------------------------------------------------------------------------------------------- why?

async function explain(event) {
  event.preventDefault();
  try {
    const data = await api("POST", "/api/authorize", formObject(event.target));
    say("why-message", "");
    $("#why-result").hidden = false;
    const verdict = $("#verdict");
    verdict.textContent = data.decision;
    verdict.className = "verdict " + data.decision;
    $("#why-explanation").textContent = data.explanation;
    $("#why-rule").textContent = data.rule.text;
    $("#why-relevant").textContent = data.relevant_acl_count;
    $("#why-count").textContent = data.matching_acls.length;
    const body = $("#why-table tbody");
    body.replaceChildren();
    for (const acl of data.matching_acls) {
      const mark = acl.decisive ? el("span", { title: "the deciding rule" }, "▶") : "";
      body.append(el("tr", { class: acl.decisive ? "decisive" : "", "data-id": acl.id }, el("td", {}, mark),
        ...aclCells(acl)));
    }
    $("#why-none").hidden = data.matching_acls.length !== 0;
  } catch (error) {
    $("#why-result").hidden = true;
    say("why-message", error.message, "error");
  }
}

// ------------------------------------------------------------------------------------------- who can?

const opList = (ops) => ops.length ? ops.join(", ") : "—";
const aclList = (acls) => el("td", { class: "small" }, acls.map(describe).join("; "));

async function whoCan(event) {
  event.preventDefault();
  const query = new URLSearchParams(formObject(event.target));
  try {
    const data = await api("GET", "/api/access/resource?" + query);
    say("holders-message", "");
    $("#holders-result").hidden = false;
    $("#holders-super").textContent = data.super_users.join(", ") || "none";
    const body = $("#holders-table tbody");
    body.replaceChildren();
    for (const h of data.holders) {
      const who = h.principal === "User:*" ? "any principal (User:*)" : h.principal;
      body.append(el("tr", { "data-principal": h.principal, "data-host": h.host },
        el("td", {}, el("code", {}, who)), el("td", {}, el("code", {}, h.host)), el("td", {}, h.via.join(", ")),
        el("td", { class: "allowed" }, opList(h.allowed)), el("td", { class: "denied" }, opList(h.denied)),
        aclList(h.acls)));
    }
    $("#holders-none").hidden = data.holders.length !== 0;
  } catch (error) {
    $("#holders-result").hidden = true;
    say("holders-message", error.message, "error");
  }
}

async function whatCan(event) {
  event.preventDefault();
  const query = new URLSearchParams(formObject(event.target));
  try {
    const data = await api("GET", "/api/access/principal?" + query);
    say("can-message", "");
    $("#can-result").hidden = false;
    $("#can-groups").textContent = data.groups.join(", ") || "none";
    $("#can-super").textContent = data.super_user ? "· a super user: every operation is allowed" : "";
    const body = $("#can-table tbody");
    body.replaceChildren();
    for (const p of data.patterns) {
      body.append(el("tr", {}, el("td", {}, p.resource_type + " ", el("code", {}, p.resource_name)),
        el("td", {}, p.pattern_type), el("td", { class: "allowed" }, opList(p.allows)),
        el("td", { class: "denied" }, opList(p.denies)), aclList(p.acls)));
    }
    const topics = $("#can-topics tbody");
    topics.replaceChildren();
    for (const t of data.topics) {
      topics.append(el("tr", { "data-topic": t.resource_name }, el("td", {}, el("code", {}, t.resource_name)),
        el("td", { class: "allowed" }, opList(t.allowed)), el("td", { class: "denied" }, opList(t.denied))));
    }
    $("#can-topic-count").textContent = data.topics.length;
  } catch (error) {
    $("#can-result").hidden = true;
    say("can-message", error.message, "error");
  }
}

async function loadGroups() {
  try {
    const data = await api("GET", "/api/groups");
    const body = $("#group-table tbody");
    body.replaceChildren();
    for (const g of data.groups) {
      const members = g.members.map((m) => {
        const remove = el("button", { type: "button", class: "link", title: "remove from the group",
          onclick: () => removeMember(g.name, m) }, "×");
        return el("span", { class: "pill mech" }, m + " ", remove);
      });
      body.append(el("tr", { "data-group": g.name }, el("td", {}, el("code", {}, g.principal)),
        el("td", {}, ...members), el("td", {})));
    }
    $("#group-count").textContent = data.count;
  } catch (error) {
    say("group-message", error.message, "error");
  }
}

async function addMembers(event) {
  event.preventDefault();
  const form = formObject(event.target);
  const members = (form.members || "").split(/[\s,]+/).filter((m) => m);
  try {
    const data = await api("POST", "/api/groups/" + encodeURIComponent(form.group) + "/members", { members });
    say("group-message", `${data.principal}: ${data.members.join(", ")}`, "ok");
    event.target.querySelector("[name=members]").value = "";
    loadGroups();
  } catch (error) {
    say("group-message", error.message, "error");
  }
}

async function removeMember(group, member) {
  try {
    await api("DELETE", "/api/groups/" + encodeURIComponent(group) + "/members/" + encodeURIComponent(member));
    say("group-message", `Removed ${member} from Group:${group}.`, "ok");
    loadGroups();
  } catch (error) {
    say("group-message", error.message, "error");
  }
}

// ---------------------------------------------------------------------------------------------- history

function historyItem(event) {
  const d = event.data;
  if (d.acl) {
    const a = d.acl;
    return el("span", {}, el("span", { class: "pill " + a.permission_type }, a.permission_type), " ",
      el("code", {}, a.principal), ` ${a.operation} from ${a.host} on ${a.resource_type}:${a.pattern_type}:`,
      el("code", {}, a.resource_name));
  }
  if (d.filter) {
    // a refused deletion names a filter, not an ACL: null is "any"
    const f = d.filter, any = (v) => (v === null || v === undefined ? "<any>" : v);
    return el("span", {}, "filter ", el("span", { class: "pill " + f.permission_type }, f.permission_type), " ",
      el("code", {}, any(f.principal)), ` ${f.operation} from ${any(f.host)} on ${event.subject}`);
  }
  if (d.summary) {
    const s = d.summary;
    return el("span", {}, `${s.not_recorded} more refused item(s) of this ${s.request} request (${s.items} in all), not recorded one by one`);
  }
  if (d.mechanism) return el("span", {}, el("code", {}, event.subject), ` ${d.mechanism}` + (d.iterations ? ` · ${d.iterations}` : ""));
  if (d.member) return el("span", {}, el("code", {}, d.member), " in ", el("code", {}, event.subject));
  if (d.quota) return el("span", {}, el("code", {}, event.subject), " " + JSON.stringify(d.quota));
  return el("code", {}, event.subject);
}

async function loadHistory() {
  const query = new URLSearchParams(formObject($("#history-form")));
  if (query.get("resource_type") === "ANY") query.delete("resource_type");
  try {
    const data = await api("GET", "/api/history" + (query.toString() ? "?" + query : ""));
    const body = $("#history-table tbody");
    body.replaceChildren();
    for (const e of data.events) {
      const actor = e.actor;
      const ok = e.result === "SUCCESS";
      const result = el("span", { class: "pill " + (ok ? "ALLOW" : "DENY"), title: e.error_message || "" },
        ok ? e.result : `${e.result}: ${e.error_message || ""}`);
      body.append(el("tr", { "data-seq": e.seq, "data-action": e.action },
        el("td", {}, e.time.replace("T", " ").slice(0, 19)), el("td", {}, e.action),
        el("td", {}, el("code", {}, actor.principal)), el("td", {}, actor.address || "–"),
        el("td", { title: actor.request_id || "" }, actor.interface), el("td", {}, historyItem(e)), el("td", {}, result)));
    }
    $("#history-count").textContent = data.count;
    $("#history-empty").hidden = data.count !== 0;
    say("history-message", "");
  } catch (error) {
    say("history-message", error.message, "error");
  }
}

// ---------------------------------------------------------------------------------------------- denials

const DENIAL_KINDS = {
  denied: ["denied", "DENY"],
  permissive: ["would be denied (permissive)", "WARN"],
};
let denialsTimer = null;

function denialKind(d) {
  if (d.kind === "shadow") {
    return el("span", { class: "pill WARN", title: "the candidate ACL set (shadow_acls) decides it the other way" },
      `shadow flip: ${d.decision} → ${d.shadow_decision}`);
  }
  if (d.kind === "broker") {  // passthrough: kafkaguard allowed, the broker's own ACLs refused
    return el("span", { class: "pill DENY", title: d.explanation || "" }, `broker refused: ${d.broker_error}`);
  }
  const [text, style] = DENIAL_KINDS[d.kind] || [d.kind, "DENY"];
  return el("span", { class: "pill " + style }, text);
}

function denialRule(d) {
  const active = el("code", {}, d.rule || "not recorded");
  if (d.kind === "broker") return el("td", { class: "small" }, "kafkaguard allowed: ", active);
  if (d.kind !== "shadow") return el("td", { class: "small" }, active);
  return el("td", { class: "small" }, active, el("br"), "candidate: ", el("code", {}, d.shadow_rule || "not recorded"));
}

// The Why? tab, filled with the denied request and asked at once: what the ACLs decide now, and why.
function whyOf(d) {
  const form = $("#why-form");
  form.querySelector("[name=principal]").value = d.principal;
  form.querySelector("[name=host]").value = d.host;
  form.querySelector("[name=operation]").value = d.operation;
  form.querySelector("[name=resource_type]").value = d.resource_type;
  form.querySelector("[name=resource_name]").value = d.resource_name;
  show("why");
  form.requestSubmit();
}

async function loadDenials() {
  const query = new URLSearchParams(formObject($("#denials-form")));
  try {
    const data = await api("GET", "/api/denials" + (query.toString() ? "?" + query : ""));
    const body = $("#denials-table tbody");
    body.replaceChildren();
    for (const d of data.denials) {
      const why = el("button", { type: "button", class: "secondary small-button", title: "explain this request now",
        onclick: () => whyOf(d) }, "Why?");
      const span = d.count > 1 ? `${d.count} (until ${d.last_time.replace("T", " ").slice(11, 19)})` : "1";
      body.append(el("tr", { "data-kind": d.kind, "data-principal": d.principal, "data-resource": d.resource_name },
        el("td", {}, d.time.replace("T", " ").slice(0, 19)), el("td", {}, denialKind(d)),
        el("td", {}, el("code", {}, d.principal)), el("td", {}, el("code", {}, d.host)), el("td", {}, d.operation),
        el("td", {}, d.resource_type + " ", el("code", {}, d.resource_name)), el("td", {}, d.api || "–"),
        denialRule(d), el("td", {}, span), el("td", {}, why)));
    }
    $("#denials-count").textContent = data.count;
    $("#denials-updated").textContent = "read " + new Date().toISOString().slice(11, 19) + " UTC";
    $("#denials-note").textContent = data.message || "";
    say("denials-message", "");
  } catch (error) {
    say("denials-message", error.message, "error");
  }
}

function stopDenialsTimer() {
  if (denialsTimer !== null) { clearInterval(denialsTimer); denialsTimer = null; }
}

function syncDenialsTimer() {
  stopDenialsTimer();
  if ($("#denials-auto").checked && !$("#denials-view").hidden) denialsTimer = setInterval(loadDenials, 5000);
}

document.addEventListener("DOMContentLoaded", () => {
  fillSelects();
  $("#login-form").addEventListener("submit", login);
  $("#logout").addEventListener("click", logout);
  for (const button of document.querySelectorAll("#tabs button")) button.addEventListener("click", () => show(button.dataset.tab));
  $("#filter-form").addEventListener("submit", (event) => { event.preventDefault(); loadAcls(); });
  $("#filter-form").addEventListener("reset", () => setTimeout(loadAcls, 0));
  $("#add-form").addEventListener("submit", addAcl);
  $("#password-form").addEventListener("submit", setPassword);
  $("#why-form").addEventListener("submit", explain);
  $("#holders-form").addEventListener("submit", whoCan);
  $("#can-form").addEventListener("submit", whatCan);
  $("#group-form").addEventListener("submit", addMembers);
  $("#history-form").addEventListener("submit", (event) => { event.preventDefault(); loadHistory(); });
  $("#history-form").addEventListener("reset", () => setTimeout(loadHistory, 0));
  $("#denials-form").addEventListener("submit", (event) => { event.preventDefault(); loadDenials(); });
  $("#denials-form").addEventListener("reset", () => setTimeout(loadDenials, 0));
  $("#denials-auto").addEventListener("change", syncDenialsTimer);
});
