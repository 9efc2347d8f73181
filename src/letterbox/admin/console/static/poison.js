// Poison suspects of one subscription (#/poison/{tenant}/{ns}/{topic}/{sub}): the messages still
// in it that were redelivered more than half the times its dead-letter policy allows, most
// redelivered first (GET .../subscription/{sub}/letterbox/poison-suspects), with their delivery
// times to the millisecond on the broker's clock and the last failure reason a client gave.
import { api, paths } from "./api.js";
import { fmtNum, h, nsCrumbs, setCrumbs, table, td } from "./dom.js";
import { fmtTime } from "./format.js";

const LIMIT = 1000;
const enc = encodeURIComponent;

export async function poisonView(root, tenant, ns, topic, sub) {
  const subHref = `#/sub/${[tenant, ns, topic, sub].map(enc).join("/")}`;
  setCrumbs([...nsCrumbs(tenant, ns), [topic, null], [sub, subHref], ["poison suspects", null]]);
  root.append(h("h1", {}, `Poison suspects of ${sub} on ${tenant}/${ns}/${topic}`));
  const answer = await api("GET", paths.poisonSuspects(tenant, ns, topic, sub, LIMIT));
  const max = answer.maxRedeliveries;
  root.append(h("div", { class: "cards" },
    h("div", { class: "card narrow" }, h("h2", {}, "suspects"), h("p", { class: "big", id: "suspect-count" },
      fmtNum(answer.suspectCount))),
    h("div", { class: "card narrow" }, h("h2", {}, "max redeliveries"), h("p", { class: "big", id: "suspect-max" },
      max === null ? "none" : fmtNum(max))),
    h("div", { class: "card" }, h("h2", {}, "what this is"), h("p", { class: "muted" },
      max === null ? "This subscription has no dead-letter policy, so no message is ever a suspect."
        : `A message redelivered more than ${max / 2} times is listed here; after ${max} redeliveries its next `
          + "failure sends it to the dead letter topic."),
    h("a", { href: subHref }, "The subscription, its dead letter and retry topics"))));
  if (!answer.suspects.length) {
    root.append(h("p", { class: "notice", id: "no-suspects" }, "No poison suspects right now."));
    return null;
  }
  if (answer.truncated) {
    root.append(h("p", { class: "muted" }, `The ${answer.suspects.length} most redelivered are listed.`));
  }
  root.append(table(["message id", { label: "deliveries", num: true }, "first delivery", "last delivery",
    "next delivery", "last failure reason"], answer.suspects.map((s) => h("tr", { class: "suspect",
    dataset: { id: s.messageId } },
  td(s.messageId, { class: "nowrap id" }),
  h("td", { class: "num nowrap" }, max === null ? fmtNum(s.deliveryCount) : `${s.deliveryCount} of ${max + 1}`),
  td(fmtTime(s.firstDeliveryTime), { class: "nowrap time" }), td(fmtTime(s.lastDeliveryTime), { class: "nowrap time" }),
  td(fmtTime(s.nextDeliveryTime), { class: "nowrap time" }),
  td(s.lastFailureReason || "–", { class: "wide" }))), { id: "suspects" }));
  return null;
}
