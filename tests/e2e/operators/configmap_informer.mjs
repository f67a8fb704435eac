// Two @kubernetes/client-node (1.x) informers of ConfigMaps and a writer, run unmodified by
// tests/e2e/test_operators.py straight against the API server and through the daemon.
//
//   node configmap_informer.mjs CLIENT_NODE_PREFIX KUBECONFIG NAMESPACE
//
// One informer sees the namespace's ConfigMaps, the other those labelled tier=front. cm-0
// exists before they start (their initial lists add it); cm-1..cm-3 are created after, each
// changed by a different verb (replace; a merge patch that moves cm-2 out of tier=front; a
// strategic merge patch that moves cm-3 into it), cm-0 by a JSON patch and then a server-side
// apply; then cm-1..cm-3 are deleted. Once each informer's cache holds what a fresh list holds and it has seen its three
// deletions (or GUARD_MS passed), prints one JSON document: per informer, its events in order
// (with the resourceVersion each carried), its cache and the fresh list; and the informers'
// errors.
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const [prefix, kubeconfig, namespace] = process.argv.slice(2);
const require = createRequire(join(prefix, 'package.json'));
const k8s = await import(pathToFileURL(require.resolve('@kubernetes/client-node')).href);

const GUARD_MS = 60_000;
const kc = new k8s.KubeConfig();
kc.loadFromFile(kubeconfig);
const api = kc.makeApiClient(k8s.CoreV1Api);

const mine = (cm) => cm.metadata.name.startsWith('cm-');
const shape = (cm) => ({ name: cm.metadata.name, data: cm.data ?? {}, labels: cm.metadata.labels ?? {} });
const byName = (items) => Object.fromEntries(
  items.filter(mine).map((cm) => [cm.metadata.name, shape(cm)]).sort(([a], [b]) => a.localeCompare(b)),
);
const body = (name, tier, data) => ({ metadata: { name, labels: { app: 'informer-test', tier } }, data });

await api.createNamespacedConfigMap({ namespace, body: body('cm-0', 'front', { step: 'before' }) });

const errors = [];
let stopping = false;
const watched = {};
for (const [key, labelSelector] of [['all', undefined], ['front', 'tier=front']]) {
  const list = () => api.listNamespacedConfigMap({ namespace, labelSelector });
  const informer = k8s.makeInformer(kc, `/api/v1/namespaces/${namespace}/configmaps`, list, labelSelector);
  const events = [];
  for (const type of ['add', 'update', 'delete']) {
    informer.on(type, (cm) => {
      if (mine(cm)) events.push({ type, ...shape(cm), resourceVersion: cm.metadata.resourceVersion });
    });
  }
  informer.on('error', (err) => {
    if (stopping) return;
    // An informer stops on an error; restart it, as client-node's own example does.
    errors.push(`${key}: ${err?.message ?? err}`);
    setTimeout(() => informer.start().catch((e) => errors.push(`${key}: ${e}`)), 500);
  });
  await informer.start();
  watched[key] = { informer, events, list };
}

const merge = k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch);
const strategic = k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.StrategicMergePatch);
const json = k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.JsonPatch);
const apply = k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.ServerSideApply);
for (const [name, tier] of [['cm-1', 'front'], ['cm-2', 'front'], ['cm-3', 'back']]) {
  await api.createNamespacedConfigMap({ namespace, body: body(name, tier, { step: 'created' }) });
}
const current = await api.readNamespacedConfigMap({ name: 'cm-1', namespace });
current.data = { step: 'replaced' };
await api.replaceNamespacedConfigMap({ name: 'cm-1', namespace, body: current });
await api.patchNamespacedConfigMap(
  { name: 'cm-2', namespace, body: { metadata: { labels: { tier: 'back' } }, data: { step: 'merged' } } },
  merge,
);
await api.patchNamespacedConfigMap(
  { name: 'cm-3', namespace, body: { metadata: { labels: { tier: 'front' } }, data: { step: 'strategic' } } },
  strategic,
);
await api.patchNamespacedConfigMap(
  { name: 'cm-0', namespace, body: [{ op: 'replace', path: '/data/step', value: 'json-patched' }] },
  json,
);
await api.patchNamespacedConfigMap(
  {
    name: 'cm-0',
    namespace,
    fieldManager: 'informer-test',
    force: true,
    body: { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'cm-0' }, data: { step: 'applied' } },
  },
  apply,
);
for (const name of ['cm-1', 'cm-2', 'cm-3']) {
  await api.deleteNamespacedConfigMap({ name, namespace });
}

const report = { errors };
for (const [key, { list }] of Object.entries(watched)) {
  watched[key].listed = byName((await list()).items);
}
const settled = () => Object.values(watched).every(({ informer, events, listed }) =>
  JSON.stringify(byName(informer.list())) === JSON.stringify(listed)
  && events.filter((e) => e.type === 'delete').length === 3);
const deadline = Date.now() + GUARD_MS;
while (!settled() && Date.now() < deadline) {
  await new Promise((resolve) => setTimeout(resolve, 50));
}
stopping = true;
for (const [key, { informer, events, listed }] of Object.entries(watched)) {
  await informer.stop();
  report[key] = { events, cache: byName(informer.list()), listed };
}
process.stdout.write(JSON.stringify(report) + '\n', () => process.exit(0));
