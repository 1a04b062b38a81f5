// SPDX-License-Identifier: MIT
//
// One call of Pyroscope's query API as Grafana's Pyroscope data source
// makes it, through a real Connect client (@connectrpc/connect over
// @connectrpc/connect-node, messages by @bufbuild/protobuf), for
// test-grafana.sh:
//
//   NODE_PATH=... node grafana_client.js DESCRIPTORS URL binary|json SERVICE.METHOD REQUEST_JSON [AUTH]
//
// DESCRIPTORS is a FileDescriptorSet (protoc --descriptor_set_out
// --include_imports) of tests/integration/proto/pyroscope; REQUEST_JSON the
// request in protobuf's JSON; AUTH an Authorization header's value. The
// call goes out in binary protobuf or in JSON, with X-Scope-OrgID as
// Grafana sends it. Prints the answer as protobuf JSON on one line, or
// "ERROR <code> <message>" (exit 2) for a Connect error.
"use strict";
const fs = require("fs");
const { createFileRegistry, fromBinary, fromJson, toJsonString } = require("@bufbuild/protobuf");
const { FileDescriptorSetSchema } = require("@bufbuild/protobuf/wkt");
const { createClient, ConnectError, Code } = require("@connectrpc/connect");
const { createConnectTransport } = require("@connectrpc/connect-node");

async function main() {
  const [desc, url, mode, full, reqJson, auth] = process.argv.slice(2);
  const registry = createFileRegistry(fromBinary(FileDescriptorSetSchema, fs.readFileSync(desc)));
  const dot = full.lastIndexOf(".");
  const service = registry.getService(full.slice(0, dot));
  if (!service) throw new Error("no service " + full.slice(0, dot));
  const method = service.methods.find((m) => m.name === full.slice(dot + 1));
  if (!method) throw new Error("no method " + full);
  const transport = createConnectTransport({
    baseUrl: url,
    httpVersion: "1.1",
    useBinaryFormat: mode === "binary",
  });
  const client = createClient(service, transport);
  const headers = { "X-Scope-OrgID": "anonymous" };
  if (auth) headers["Authorization"] = auth;
  try {
    const res = await client[method.localName](fromJson(method.input, JSON.parse(reqJson)), {
      headers,
      timeoutMs: 30000,
    });
    process.stdout.write(toJsonString(method.output, res) + "\n");
  } catch (e) {
    if (e instanceof ConnectError) {
      process.stdout.write("ERROR " + Code[e.code] + " " + e.rawMessage + "\n");
      process.exit(2);
    }
    throw e;
  }
}

main().catch((e) => {
  process.stderr.write("grafana_client: " + (e && e.stack ? e.stack : e) + "\n");
  process.exit(1);
});
