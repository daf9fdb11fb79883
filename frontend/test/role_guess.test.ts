import { describe, expect, it } from "vitest";
import { exactPattern, fixRule, guessLegend, guessLine, guessNote, isGuessed } from "../src/role_guess";

describe("guessed roles", () => {
  it("are the roles read from name words, or none at all", () => {
    expect(isGuessed("name")).toBe(true);
    expect(isGuessed("fallback")).toBe(true);
    expect(isGuessed("data")).toBe(true);
    for (const sure of ["rule", "convention", "pairing", undefined]) expect(isGuessed(sure)).toBe(false);
    expect(guessNote("convention", "weight")).toBeNull();
    expect(guessNote("name", "weight")).toContain('"weight" guessed');
    expect(guessNote("fallback", "other")).toContain("Role unknown");
    expect(guessNote("data", "activation")).toBe(
      'Role "activation" guessed from the data, not the name: never negative, with a share at zero, as a ReLU\'s output.',
    );
  });

  it("include a weight whose parameter another tag names too", () => {
    expect(isGuessed("shared_name")).toBe(true);
    expect(guessNote("shared_name", "other")).toContain("another tag names the same parameter");
    expect(guessLine("shared_name", "other")?.[1]).toContain("both cannot be its weights");
    expect(guessLegend(["convention", "shared_name"])?.title).toContain("two tags name one parameter");
  });

  it("include an optimizer's state, told by its name", () => {
    expect(isGuessed("optimizer_state")).toBe(true);
    expect(guessNote("optimizer_state", "other")).toContain("An optimizer's state");
    expect(guessLine("optimizer_state", "other")?.[1]).toContain("so it is no weight");
    expect(guessLegend(["convention", "optimizer_state"])?.title).toContain("an optimizer's state");
  });

  it("offer a rule that matches the tag alone", () => {
    const tag = "model_params/W_fc1.weight:0 (x)";
    const pattern = exactPattern(tag);
    expect(new RegExp(pattern).test(tag)).toBe(true);
    expect(new RegExp(pattern).test(`${tag}x`)).toBe(false);
    expect(new RegExp(pattern).test("model_params/W_fc1xweight:0 (x)")).toBe(false);
    const rule = JSON.parse(fixRule(tag, "activation"));
    expect(rule).toEqual({ tag_rules: [{ pattern, role: "activation" }] });
    // A row of unknown role gets a rule to edit, with a valid role in it.
    expect(JSON.parse(fixRule(tag, "other")).tag_rules[0].role).toBe("weight");
  });
});

describe("the ? after a guessed row's name", () => {
  it("is said in words where the name is hovered, for guessed rows only", () => {
    const [key, text] = guessLine("name", "activation") as [string, string];
    expect(key).toBe("?");
    expect(text).toContain('Role "activation" guessed from the words of the tag\'s name.');
    expect(text).toContain("rule that sets it");
    expect(guessLine("convention", "activation")).toBeNull();
    expect(guessLine(undefined, "weight")).toBeNull();
  });

  it("is in the legend when some row here was guessed", () => {
    const legend = guessLegend(["convention", "name", "rule"]);
    expect(legend?.label).toBe("name ? = role guessed");
    expect(legend?.title).toContain("guessed from the words of the tag's name or from its values");
    expect(guessLegend(["fallback"])).not.toBeNull();
    expect(guessLegend(["convention", "pairing", "rule"])).toBeNull();
    expect(guessLegend([])).toBeNull();
  });
});
