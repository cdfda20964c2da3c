import { test } from "node:test";
import assert from "node:assert/strict";
import { create, toJson } from "@bufbuild/protobuf";
import { httpsListener } from "../../../src/cli/status-view.js";
import { AddressRegionStatusSchema } from "../../../src/gen/krane/ctrl/v1/exposure_pb.js";

test("an address's HTTPS column says whether its listeners are programmed, and why not", () => {
  const region = (listeners: ({ status: string; reason?: string } | undefined)[]) =>
    toJson(
      AddressRegionStatusSchema,
      create(AddressRegionStatusSchema, {
        region: "eu",
        route: {
          certificates: listeners.map((l, i) => ({ hostname: `h${i}.example`, listener: l })),
        },
      }),
    );
  assert.equal(
    httpsListener(toJson(AddressRegionStatusSchema, create(AddressRegionStatusSchema, { region: "eu" }))),
    "-",
    "no report yet",
  );
  assert.equal(httpsListener(region([undefined])), "-", "the region's agent serves no HTTPS");
  assert.equal(httpsListener(region([{ status: "True" }, { status: "True" }])), "programmed");
  assert.equal(httpsListener(region([{ status: "True" }, { status: "" }])), "pending");
  assert.equal(httpsListener(region([{ status: "False", reason: "InvalidCertificateRef" }])), "InvalidCertificateRef");
  assert.equal(httpsListener(region([{ status: "Unknown" }])), "unknown");
});
