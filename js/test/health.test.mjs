import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { followersText, groupFindings, groupShown, scoreText, whereText } from "../lib/health/tree.js";

/** @param {string} id @param {string} severity @param {string} [root] */
const f = (id, severity, root = "") => ({ id, check: id.split(":")[0], layer: "", step: null, severity, message: "", evidence: "{}", cause: "learning_rate", root });

describe("health report tree", () => {
  it("folds each finding under its root and puts a root where its worst consequence would be", () => {
    const findings = [
      f("dead_units:act2@7", "error", "learning_rate_too_high@2"),
      f("stuck_weights:fc1@0", "warning"),
      f("learning_rate_too_high@2", "info"),
      f("stuck_weights:fc2@7", "warning", "learning_rate_too_high@2"),
    ];
    const groups = groupFindings(findings);
    assert.deepEqual(
      groups.map((g) => [g.finding.id, g.children.map((c) => c.finding.id)]),
      [
        ["learning_rate_too_high@2", ["dead_units:act2@7", "stuck_weights:fc2@7"]],
        ["stuck_weights:fc1@0", []],
      ],
    );
    assert.deepEqual(groups[0].children.map((c) => c.index), [0, 3]);
  });

  it("a finding whose root is not in the list is a root of its own", () => {
    const groups = groupFindings([f("a", "warning", "gone")]);
    assert.equal(groups.length, 1);
    assert.equal(groups[0].finding.id, "a");
  });

  it("an info-only group is listed only when info is asked for", () => {
    const [group] = groupFindings([f("a", "info")]);
    assert.equal(groupShown(group, false), false);
    assert.equal(groupShown(group, true), true);
  });

  it("words: the score as a percentage, where a finding is, how many follow", () => {
    assert.equal(scoreText(0.876), "88%");
    assert.equal(whereText({ ...f("a", "info"), layer: "act2", step: 1200 }, (s) => s.toLocaleString("en-US")), "layer act2 \u00b7 step 1,200");
    assert.equal(whereText(f("a", "info"), String), "whole run");
    assert.equal(followersText(1), "1 finding follows from it");
    assert.equal(followersText(3), "3 findings follow from it");
  });
});
