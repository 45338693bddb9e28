// Validates every object of the Kubernetes manifests in a directory
// against the OpenAPI schema of its kind, as kubernetes-models generates
// them from the Kubernetes API: types, required fields, enums and
// formats. (Unknown fields are caught by the Go check beside this one,
// which decodes the manifests strictly into the API types.)
//
//   npm ci && npm run check
import { readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { parseAllDocuments } from "yaml";

const dir = process.argv[2];
let failed = 0;
let checked = 0;
for (const file of readdirSync(dir).filter((f) => f.endsWith(".yaml")).sort()) {
  for (const doc of parseAllDocuments(readFileSync(join(dir, file), "utf8"))) {
    if (doc.errors.length > 0) {
      console.log(`FAIL ${file}: ${doc.errors[0].message}`);
      failed++;
      continue;
    }
    const obj = doc.toJS();
    if (obj === null || obj.kind === "Kustomization") continue;
    const name = `${file}: ${obj.kind} ${obj.metadata?.name}`;
    let model;
    try {
      model = (await import(`kubernetes-models/${obj.apiVersion}/${obj.kind}`))[obj.kind];
    } catch {
      console.log(`FAIL ${name}: no schema for ${obj.apiVersion} ${obj.kind}`);
      failed++;
      continue;
    }
    try {
      new model(obj).validate();
      console.log(`ok   ${name}`);
      checked++;
    } catch (e) {
      console.log(`FAIL ${name}: ${e.message}`);
      failed++;
    }
  }
}
console.log(`${checked} passed, ${failed} failed`);
process.exit(failed > 0 || checked === 0 ? 1 : 0);
