// Validates Kubernetes manifests against the API schemas with kubernetes-models' validate():
//   node validate.mjs FILE.yaml...
// Every document must have an apiVersion and kind this script knows; exits 1 naming the file,
// the document and the schema error on the first invalid one.
import { readFileSync } from "node:fs";
import { parseAllDocuments } from "yaml";
import { ConfigMap, Secret, Service } from "kubernetes-models/v1";
import { Deployment } from "kubernetes-models/apps/v1";
import { PodDisruptionBudget } from "kubernetes-models/policy/v1";

const models = {
  "v1/ConfigMap": ConfigMap,
  "v1/Secret": Secret,
  "v1/Service": Service,
  "apps/v1/Deployment": Deployment,
  "policy/v1/PodDisruptionBudget": PodDisruptionBudget,
};

let n = 0;
for (const file of process.argv.slice(2)) {
  const docs = parseAllDocuments(readFileSync(file, "utf8"));
  docs.forEach((doc, i) => {
    if (doc.errors.length > 0) {
      console.error(`${file}: document ${i + 1}: YAML error: ${doc.errors[0].message}`);
      process.exit(1);
    }
    const obj = doc.toJS();
    if (obj === null || obj === undefined) return;
    const Model = models[`${obj.apiVersion}/${obj.kind}`];
    if (!Model) {
      console.error(`${file}: document ${i + 1}: no schema for ${obj.apiVersion} ${obj.kind}`);
      process.exit(1);
    }
    try {
      new Model(obj).validate();
    } catch (e) {
      console.error(`${file}: document ${i + 1} (${obj.kind} ${obj.metadata?.name}): ${e.message}`);
      if (e.errors) console.error(JSON.stringify(e.errors, null, 2));
      process.exit(1);
    }
    ++n;
  });
}
if (n === 0) {
  console.error("no Kubernetes objects found");
  process.exit(1);
}
console.log(`k8s: ${n} objects valid`);
