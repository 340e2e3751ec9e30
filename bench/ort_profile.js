#!/usr/bin/env node
// Where ONNX Runtime's time goes on one model, node by node: its own
// profiler (enableProfiling) over N runs on one intra-op thread (graph
// optimisation all, as bench/ort.js), summed by op type and by node; the
// counterpart of bench/profile for modelc's kernels. A measurement tool,
// not a test. Inputs are filled with ones (float or int64); symbolic
// dimensions are taken as 1. Prints each node's median time over the runs.
//
// usage: node bench/ort_profile.js MODEL.onnx [RUNS (20)] [TOP (30)] [THREADS (1)]
'use strict';
const fs = require('fs');
const os = require('os');
const path = require('path');

const root = path.resolve(__dirname, '..');
const ort = require(path.join(root, '.cache', 'npm-tools', 'node_modules', 'onnxruntime-node'));

async function main() {
	const [model, runsArg, topArg, threadsArg] = process.argv.slice(2);
	if (!model) {
		console.error('usage: node bench/ort_profile.js MODEL.onnx [RUNS] [TOP] [THREADS]');
		process.exit(2);
	}
	const runs = Number(runsArg || 20), top = Number(topArg || 30), threads = Number(threadsArg || 1);
	const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ort-profile-'));
	const session = await ort.InferenceSession.create(model, {
		intraOpNumThreads: threads, interOpNumThreads: 1, executionMode: 'sequential',
		graphOptimizationLevel: 'all', enableProfiling: true,
		profileFilePrefix: path.join(dir, 'prof'),
	});
	const feeds = {};
	for (const meta of session.inputMetadata) {
		const dims = (meta.shape || []).map(d => (typeof d === 'number' && d > 0 ? d : 1));
		const n = dims.reduce((a, b) => a * b, 1);
		feeds[meta.name] = meta.type === 'int64'
			? new ort.Tensor('int64', new BigInt64Array(n).fill(1n), dims)
			: new ort.Tensor('float32', new Float32Array(n).fill(1), dims);
	}
	for (let i = 0; i < runs; i++)
		await session.run(feeds);
	session.endProfiling();
	const file = fs.readdirSync(dir).filter(f => f.startsWith('prof')).map(f => path.join(dir, f))[0];
	const events = JSON.parse(fs.readFileSync(file, 'utf8'));
	fs.rmSync(dir, {recursive: true, force: true});
	// each node's median over the runs (the first run's allocations and
	// cold caches count once, not in the figure)
	const times = new Map(), opOf = new Map();
	for (const e of events) {
		if (e.cat !== 'Node' || !e.name.endsWith('_kernel_time'))
			continue;
		const node = e.name.slice(0, -'_kernel_time'.length);
		if (!times.has(node))
			times.set(node, []);
		times.get(node).push(e.dur);
		opOf.set(node, e.args.op_name);
	}
	const median = v => { const s = [...v].sort((a, b) => a - b); return s[s.length >> 1]; };
	const byNode = new Map(), byOp = new Map();
	let total = 0;
	for (const [node, v] of times) {
		const us = median(v);
		byNode.set(node, us);
		byOp.set(opOf.get(node), (byOp.get(opOf.get(node)) || 0) + us);
		total += us;
	}
	console.log(`ort_profile: ${times.size} nodes, ${total} us a run in kernels (medians of ${runs} runs, ` +
		`${threads} thread(s))`);
	const show = (m, label, k) => [...m.entries()].sort((a, b) => b[1] - a[1]).slice(0, k)
		.forEach(([name, us]) => console.log(`${String(us).padStart(10)} us  ${label} ${name}`));
	show(byOp, 'op', byOp.size);
	show(byNode, 'node', top);
}
main().catch(e => { console.error(`ort_profile: ${e.message}`); process.exit(2); });
