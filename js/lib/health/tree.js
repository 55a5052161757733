// The HealthReport's structure: findings grouped under the root cause they
// follow from, and the words of a verdict row. Pure: unit-tested in node.

/**
 * @typedef {{id: string, check: string, layer: string, step: number | null,
 *   severity: "error" | "warning" | "info", message: string, evidence: string,
 *   cause: string, root: string}} Finding
 * @typedef {{cause: string, score: number, summary: string, advice: string,
 *   evidence: string[], findings: string[]}} Verdict
 * @typedef {{finding: Finding, index: number, children: {finding: Finding, index: number}[],
 *   worst: number}} Group
 */

const RANK = { error: 0, warning: 1, info: 2 };

/** @param {string} severity */
export function severityRank(severity) {
  return RANK[/** @type {keyof typeof RANK} */ (severity)] ?? 3;
}

/**
 * Roots with the findings that follow from them, worst group first (a root goes
 * where its worst consequence would; ties keep the order given). A finding whose
 * root is missing from the list counts as a root.
 * @param {Finding[]} findings
 * @returns {Group[]}
 */
export function groupFindings(findings) {
  const ids = new Set(findings.map((f) => f.id));
  /** @type {Map<string, Group>} */
  const groups = new Map();
  /** @type {Group[]} */
  const order = [];
  findings.forEach((finding, index) => {
    if (finding.root && ids.has(finding.root)) return;
    const group = { finding, index, children: [], worst: severityRank(finding.severity) };
    groups.set(finding.id, group);
    order.push(group);
  });
  findings.forEach((finding, index) => {
    const group = finding.root ? groups.get(finding.root) : undefined;
    if (!group) return;
    group.children.push({ finding, index });
    group.worst = Math.min(group.worst, severityRank(finding.severity));
  });
  return order
    .map((g, i) => ({ g, i }))
    .sort((a, b) => a.g.worst - b.g.worst || a.i - b.i)
    .map(({ g }) => g);
}

/**
 * Whether a group is listed: anything to act on in it, or info findings asked for.
 * @param {Group} group
 * @param {boolean} showInfo
 */
export function groupShown(group, showInfo) {
  return showInfo || group.worst < RANK.info;
}

/** "learning_rate" -> "learning rate" */
export function causeText(cause) {
  return String(cause).replace(/_/g, " ");
}

/**
 * "86%": a verdict's score as a percentage.
 * @param {number} score
 */
export function scoreText(score) {
  return Number.isFinite(score) ? `${Math.round(100 * score)}%` : "";
}

/**
 * "layer act2 · step 7", "whole run · step 3", or "layer fc1".
 * @param {Finding} f
 * @param {(step: number) => string} formatStep
 */
export function whereText(f, formatStep) {
  return [f.layer ? `layer ${f.layer}` : "whole run", f.step !== null && f.step !== undefined ? `step ${formatStep(f.step)}` : ""]
    .filter(Boolean)
    .join(" \u00b7 ");
}

/**
 * "3 findings follow from it" for a root's disclosure button.
 * @param {number} n
 */
export function followersText(n) {
  return `${n} finding${n === 1 ? "" : "s"} follow${n === 1 ? "s" : ""} from it`;
}
