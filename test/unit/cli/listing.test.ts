// The top-level command listing (src/cli/listing.ts): a run defines in full only its command's
// group, the others as stand-ins that --help still lists; a word of a group the program does not
// hold (the single file's servers) is no command of the listing.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { Command } from "commander";
import { commandWord, defineAll, defineFor, parseListing } from "../../../src/cli/listing.js";
import type { Group } from "../../../src/cli/program.js";

const groups: Group[] = [
  ["alpha", (p) => void p.command("alpha <target>").description("the alpha").option("--fast", "quickly")],
  ["beta", (p) => void p.command("beta").description("the beta").option("--slow", "slowly")],
  ["version", (p) => void p.command("version").description("the version")],
];

describe("the command listing", () => {
  const listing = defineAll(new Command(), groups);

  it("lists each top-level command with its group, usage and description", () => {
    assert.deepEqual(listing[0], {
      group: "alpha",
      name: "alpha",
      term: "alpha [options] <target>",
      description: "the alpha",
    });
    assert.deepEqual(
      listing.map((l) => l.group),
      ["alpha", "beta", "version"],
    );
    assert.deepEqual(parseListing(JSON.stringify(listing)), listing);
    assert.equal(parseListing("{}"), undefined);
    assert.equal(parseListing("not json"), undefined);
  });

  it("defines the command's group and version in full, the others as stand-ins", () => {
    const program = new Command();
    assert.equal(defineFor(program, groups, listing, "beta"), true);
    const byName = new Map(program.commands.map((c) => [c.name(), c]));
    assert.deepEqual(
      byName.get("beta")?.options.map((o) => o.long),
      ["--slow"],
    );
    assert.deepEqual(byName.get("alpha")?.options, [], "alpha is a stand-in");
    assert.ok(byName.has("version"));
    const help = program.helpInformation();
    assert.match(help, /alpha \[options\] <target>\s+the alpha/, "--help shows the stand-in's usage");
  });

  it("refuses a word that no group of the program has", () => {
    assert.equal(defineFor(new Command(), groups, listing, "gamma"), false);
    // The listing names "ctrl" in a group this program does not hold.
    const wider = [...listing, { group: "ctrl", name: "ctrl", term: "ctrl", description: "servers" }];
    assert.equal(defineFor(new Command(), groups, wider, "ctrl"), false);
    assert.equal(defineFor(new Command(), groups, wider, undefined), true);
  });

  it("finds the command word", () => {
    // An option's value before the command is taken for the word: no command has it, so the
    // caller defines every group (defineFor is false), and commander parses as usual.
    assert.equal(commandWord(["--ctrl-url", "x", "status", "a/b"]), "x");
    assert.equal(commandWord(["status", "shop/prod", "-o", "json"]), "status");
    assert.equal(commandWord(["help", "deploy"]), "deploy");
    assert.equal(commandWord(["help"]), "help");
    assert.equal(commandWord(["--help"]), undefined);
  });
});
