// ctrl's UTF-8 encoder for protobuf-es strings (src/ctrl/payloads/text-encoding.ts) gives the
// bytes TextEncoder gives, for any string, lone surrogates included, and a message encoded with
// it is byte for byte the message encoded with protobuf-es's default.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { create, toBinary } from "@bufbuild/protobuf";
import { configureTextEncoding, getTextEncoding } from "@bufbuild/protobuf/wire";
import fc from "fast-check";
import { ApplyDeploymentSchema, EnvVarSchema } from "../../../src/gen/krane/ctrl/v1/cluster_pb.js";
import { encodeUtf8, useBufferTextEncoding } from "../../../src/ctrl/payloads/text-encoding.js";

const te = new TextEncoder();

describe("ctrl's UTF-8 encoding of protobuf strings", () => {
  it("equals TextEncoder's for any string", () => {
    fc.assert(
      fc.property(fc.string({ unit: "binary" }), (s) => {
        assert.deepEqual(new Uint8Array(encodeUtf8(s)), te.encode(s));
      }),
      { numRuns: 2000 },
    );
    // Lone surrogates, both halves, become U+FFFD in both.
    for (const s of ["\ud800", "a\udc00b", "\udbff\ud800"])
      assert.deepEqual(new Uint8Array(encodeUtf8(s)), te.encode(s));
  });

  it("encodes a message to the bytes protobuf-es's default gives, and is set once", () => {
    const original = getTextEncoding();
    const message = (image: string, names: string[]) =>
      create(ApplyDeploymentSchema, {
        image,
        region: "eu",
        replicas: 3,
        env: names.map((name) => create(EnvVarSchema, { name, value: `${name}=${image}` })),
      });
    const samples = fc.sample(fc.tuple(fc.string({ unit: "binary" }), fc.array(fc.string({ unit: "grapheme" }))), 300);
    const before = samples.map(([image, names]) => toBinary(ApplyDeploymentSchema, message(image, names)));
    try {
      useBufferTextEncoding();
      const set = getTextEncoding();
      assert.equal(set.encodeUtf8, encodeUtf8);
      useBufferTextEncoding();
      assert.equal(getTextEncoding(), set, "a second call changes nothing");
      samples.forEach(([image, names], i) =>
        assert.deepEqual(toBinary(ApplyDeploymentSchema, message(image, names)), before[i]),
      );
    } finally {
      configureTextEncoding(original);
    }
  });
});
