#!/usr/bin/env node
// The benchmark's timing loop (bench/run builds everything, then calls
// this): for each model of the plan, modelc's generated code (through
// bench/driver.c, over stdin/stdout), ONNX Runtime on one thread, and a
// one-element Identity model (the Node binding's fixed per-call cost) run
// in interleaved batches over many rounds, on the same seeded inputs; the
// outputs are compared once. Prints the markdown table.
//
// usage: node bench/ort.js PLAN --peak GFLOPS [--peak-cmd PEAK] [--budget S]
//                 [--reps N] [--min-reps N] [--threads N] [--info KEY=VALUE]...
//                 [--write RESULTS.md] [--json FILE]
//
// PLAN: tab-separated lines NAME STATUS DIR MODEL PINS SEED SCALE COMPARE,
// as bench/run writes them (STATUS "ok", or why the model has no driver).
// --budget S: seconds of timed calls per side per model (default 2);
// --reps N: exactly N timed calls per side instead; never fewer than
// --min-reps (default 5). --peak-cmd: bench/peak.c's binary, run again
// after every model; the best of its figures and --peak is the peak.
// --info lines go under the table. --write puts the table into RESULTS.md
// (its "Latest" section) and appends it to its history. --json writes every
// figure (per side: min, p10, median, p90 of the per-call times in ns).
// --threads N (N > 1; the drivers built with -DWORKERS=N): four sides
// instead of two, all in the same rounds: the driver's NAME_run (one
// thread) and NAME_run_threads (N workers), ORT with 1 and with N intra-op
// threads (two sessions); the N-worker outputs must be the same bytes as
// the one-thread ones, and the table compares the thread counts. There,
// every batch starts with one untimed call, and after ORT's N-thread
// batches the harness waits until ORT's spinning workers have stopped.
// Environment: MODELC_RUN_TIMEOUT, seconds one modelc call may take before
// its driver counts as hung and is killed (default 300).
// Exit status: 0 (a model that fails shows in its row), 2 on a harness
// error (the table is still printed when only some models hit one).
'use strict';
const fs = require('fs');
const path = require('path');
const readline = require('readline');
const {spawn, execFileSync} = require('child_process');

const root = path.resolve(__dirname, '..');
const ortDir = path.join(root, '.cache', 'npm-tools', 'node_modules', 'onnxruntime-node');

function die(msg, code = 2) {
	process.stderr.write(`bench/ort.js: ${msg}\n`);
	process.exit(code);
}

function parseArgs(argv) {
	const a = {budget: 2, reps: 0, minReps: 5, threads: 1, peak: 0, peakCmd: null, info: [], write: null, json: null, pos: []};
	for (let i = 0; i < argv.length; i++) {
		const arg = argv[i];
		const next = () => {
			if (i + 1 >= argv.length) die(`${arg} needs a value`);
			return argv[++i];
		};
		if (arg === '--budget') a.budget = Number(next());
		else if (arg === '--reps') a.reps = Number(next());
		else if (arg === '--min-reps') a.minReps = Number(next());
		else if (arg === '--threads') a.threads = Number(next());
		else if (arg === '--peak') a.peak = Number(next());
		else if (arg === '--peak-cmd') a.peakCmd = next();
		else if (arg === '--info') a.info.push(next());
		else if (arg === '--write') a.write = next();
		else if (arg === '--json') a.json = next();
		else if (arg.startsWith('--')) die(`unknown option '${arg}'`);
		else a.pos.push(arg);
	}
	if (a.pos.length !== 1) die('usage: ort.js PLAN --peak GFLOPS [--budget S] [--reps N] [--min-reps N] [--threads N] [--info K=V]... [--write FILE]');
	if (!(a.budget > 0) || !Number.isInteger(a.reps) || a.reps < 0 || !(a.minReps >= 1)) die('bad --budget, --reps or --min-reps');
	if (!Number.isInteger(a.threads) || a.threads < 1) die('bad --threads');
	return a;
}

// ---- inputs: seeded exactly like tests/models/reference.js ----

// mulberry32, as reference.js: floats in [0, 1).
function mulberry32(seed) {
	let a = seed >>> 0;
	return () => {
		a = (a + 0x6d2b79f5) >>> 0;
		let t = a;
		t = Math.imul(t ^ (t >>> 15), t | 1);
		t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
		return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
	};
}

// "input=1x1280,other=2x3,fill:sr=16000" -> {input: [1, 1280], other: [2, 3],
// fills: {sr: 16000}} (fill: every element of that input is the value)
function parsePins(text) {
	const pins = {fills: {}};
	if (text === '-' || !text) return pins;
	for (let p of text.split(',')) {
		const fill = p.startsWith('fill:');
		if (fill) p = p.slice(5);
		const eq = p.lastIndexOf('=');
		if (fill) pins.fills[p.slice(0, eq)] = Number(p.slice(eq + 1));
		else pins[p.slice(0, eq)] = p.slice(eq + 1) === 'scalar' ? [] : p.slice(eq + 1).split('x').map(Number);
	}
	return pins;
}

// One tensor per input, in the session's input order, as reference.js
// draws them from one generator.
function makeFeeds(ort, session, pins, seed, scale) {
	const random = mulberry32(seed);
	const feeds = {};
	const arrays = {float32: Float32Array, float64: Float64Array};
	const filled = {...arrays, int64: BigInt64Array, int32: Int32Array, int8: Int8Array, uint8: Uint8Array, bool: Uint8Array};
	for (const meta of session.inputMetadata) {
		const fill = pins.fills[meta.name];
		const Array_ = (fill === undefined ? arrays : filled)[meta.type];
		if (!meta.isTensor || !Array_) throw new Error(`input '${meta.name}' is ${meta.type}: only float inputs are generated`);
		const dims = pins[meta.name] || meta.shape;
		if (!dims.every((d) => typeof d === 'number' && d >= 0)) throw new Error(`input '${meta.name}' has a symbolic dim: pin it in models.tsv`);
		const n = dims.reduce((p, d) => p * d, 1);
		const data = new Array_(n);
		if (fill !== undefined) {
			data.fill(Array_ === BigInt64Array ? BigInt(fill) : fill);
			feeds[meta.name] = new ort.Tensor(meta.type, data, dims);
			continue;
		}
		// models.tsv's scale: S (uniform in [-S, S]) or LO:HI, as tests/models/reference.js
		const range = String(scale).split(':').map(Number);
		if (range.length === 2) for (let i = 0; i < n; i++) data[i] = range[0] + random() * (range[1] - range[0]);
		else for (let i = 0; i < n; i++) data[i] = (2 * random() - 1) * scale;
		feeds[meta.name] = new ort.Tensor(meta.type, data, dims);
	}
	return feeds;
}

// ---- the Identity model, built as protobuf bytes ----

function varint(n) {
	const out = [];
	while (n > 127) {
		out.push((n & 127) | 128);
		n = Math.floor(n / 128);
	}
	out.push(n);
	return out;
}

// A length-delimited field (wire type 2) or a varint field (wire type 0).
function field(num, payload) {
	if (typeof payload === 'number') return [...varint(num * 8), ...varint(payload)];
	const bytes = typeof payload === 'string' ? [...Buffer.from(payload, 'utf8')] : payload;
	return [...varint(num * 8 + 2), ...varint(bytes.length), ...bytes];
}

// ValueInfoProto: a float tensor of shape [1].
function valueInfo(name) {
	const dim = field(1, 1);                          // Dimension.dim_value
	const shape = field(1, dim);                      // TensorShapeProto.dim
	const tensorType = [...field(1, 1), ...field(2, shape)]; // elem_type FLOAT, shape
	const type = field(1, tensorType);                // TypeProto.tensor_type
	return [...field(1, name), ...field(2, type)];
}

// ModelProto: ir_version 8, opset 13, graph y = Identity(x) over float[1].
function identityModel() {
	const node = [...field(1, 'x'), ...field(2, 'y'), ...field(4, 'Identity')];
	const graph = [...field(1, node), ...field(2, 'identity'), ...field(11, valueInfo('x')), ...field(12, valueInfo('y'))];
	const opset = [...field(1, ''), ...field(2, 13)];
	return Uint8Array.from([...field(1, 8), ...field(7, graph), ...field(8, opset)]);
}

// ---- the C driver, one line per command ----

// How long one call may take before the driver counts as hung.
const driverTimeoutMs = 1e3 * Number(process.env.MODELC_RUN_TIMEOUT || 300);

class Driver {
	constructor(exe, inputFiles) {
		this.proc = spawn(exe, inputFiles, {stdio: ['pipe', 'pipe', 'pipe']});
		this.stderr = '';
		this.proc.stderr.on('data', (d) => { this.stderr += d; });
		this.proc.stdin.on('error', () => {}); // a dead driver: its exit says why
		this.waiting = [];
		this.exited = null;
		this.proc.on('error', (e) => this.fail(`cannot start: ${e.message}`));
		this.proc.on('exit', (code, signal) => this.fail(`exited (${signal || 'status ' + code})${this.stderr.trim() ? ': ' + this.stderr.trim() : ''}`));
		readline.createInterface({input: this.proc.stdout}).on('line', (line) => {
			const w = this.waiting.shift();
			if (w) w.resolve(line);
		});
	}

	fail(why) {
		this.exited = this.exited || why;
		for (const w of this.waiting.splice(0)) w.reject(new Error(`driver ${this.exited}`));
	}

	// One command, its answer line; a driver silent for timeoutMs (a hung
	// kernel) is killed, which fails this and every later command.
	ask(command, timeoutMs) {
		if (this.exited) return Promise.reject(new Error(`driver ${this.exited}`));
		// setTimeout takes at most 2^31 - 1 ms: a longer delay fires at once
		// (a fast model's many calls, each given 300 s, passed it)
		timeoutMs = Math.min(timeoutMs, 2147483647);
		return new Promise((resolve, reject) => {
			const timer = setTimeout(() => {
				this.fail(`gave no answer to '${command}' in ${timeoutMs / 1e3} s (killed)`);
				this.proc.kill('SIGKILL');
				// Whatever it started must not keep this process waiting.
				for (const s of [this.proc.stdin, this.proc.stdout, this.proc.stderr]) s.destroy();
			}, timeoutMs);
			const done = (f) => (x) => { clearTimeout(timer); f(x); };
			this.waiting.push({resolve: done(resolve), reject: done(reject)});
			this.proc.stdin.write(command + '\n');
		});
	}

	async ok(command, timeoutMs = driverTimeoutMs) {
		const line = await this.ask(command, timeoutMs);
		if (!line.startsWith('ok')) throw new Error(`driver: ${command}: ${line}`);
		return line.slice(2).trim();
	}

	// n calls, each given the time limit of one first call; threaded: on
	// the driver's pool (NAME_run_threads).
	async run(n, threaded = false) {
		return (await this.ok(`${threaded ? 't' : ''}run ${n}`, n * driverTimeoutMs)).split(' ').map(Number);
	}

	close() {
		if (!this.exited) this.proc.stdin.end('quit\n');
	}
}

async function timeSession(session, feeds, n) {
	const times = [];
	for (let i = 0; i < n; i++) {
		const t0 = process.hrtime.bigint();
		await session.run(feeds);
		times.push(Number(process.hrtime.bigint() - t0));
	}
	return times;
}

// ---- comparison, as tests/models/compare.js ----

// max|out - ref| <= tol * max|ref| on floats (NaN matching NaN), exact on
// integers; up to allowedFraction of the elements may be 0 on one side only.
function compareOne(ref, out, isFloat, tol, allowedFraction) {
	if (ref.length !== out.length) return {error: `${out.length} elements, reference ${ref.length}`};
	let maxRef = 0;
	for (const r of ref) {
		const a = Math.abs(Number(r));
		if (Number.isFinite(a)) maxRef = Math.max(maxRef, a);
	}
	const bound = isFloat ? tol * maxRef : 0;
	let maxDiff = 0, over = 0, flips = 0;
	for (let i = 0; i < ref.length; i++) {
		const r = Number(ref[i]), x = Number(out[i]);
		let diff;
		if (Number.isNaN(r) || Number.isNaN(x)) diff = Number.isNaN(r) === Number.isNaN(x) ? 0 : Infinity;
		else diff = r === x ? 0 : Math.abs(x - r);
		if (diff > bound && allowedFraction > 0 && (r === 0) !== (x === 0)) {
			flips++;
			continue;
		}
		maxDiff = Math.max(maxDiff, diff);
		if (diff > bound) over++;
	}
	const ratio = maxDiff === 0 ? 0 : maxRef > 0 ? maxDiff / maxRef : Infinity;
	return {ratio, over, flips, pass: over === 0 && flips <= Math.floor(allowedFraction * ref.length)};
}

// "--mask-flips scores=0.001" (models.tsv's compare column) -> {scores: 0.001}
function parseMaskFlips(text) {
	const flips = {};
	const words = text === '-' ? [] : text.split(/\s+/);
	for (let i = 0; i + 1 < words.length; i++) {
		if (words[i] !== '--mask-flips') continue;
		const eq = words[i + 1].lastIndexOf('=');
		flips[words[i + 1].slice(0, eq)] = Number(words[i + 1].slice(eq + 1));
	}
	return flips;
}

// modelc's outputs (DIR/k.bin, in NAME.json's order) against ORT's.
function checkOutputs(manifest, outDir, results, maskFlips) {
	let worst = 0;
	const bad = [];
	manifest.outputs.forEach((o, k) => {
		const ref = results[o.name];
		if (!ref) {
			bad.push(`${o.name}: ORT has no such output`);
			return;
		}
		const buf = fs.readFileSync(path.join(outDir, `${k}.bin`));
		const Ctor = ref.data.constructor;
		if (buf.length !== ref.data.byteLength) {
			bad.push(`${o.name}: ${buf.length} bytes, ORT ${ref.data.byteLength}`);
			return;
		}
		const out = new Ctor(buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.byteLength));
		const isFloat = Ctor === Float32Array || Ctor === Float64Array;
		const r = compareOne(ref.data, out, isFloat, 1e-4, maskFlips[o.name] || 0);
		if (r.error) bad.push(`${o.name}: ${r.error}`);
		else if (!r.pass) bad.push(`${o.name}: ${r.over} element(s) over the bound, max diff / max ref ${r.ratio.toExponential(1)}${r.flips ? `, ${r.flips} masked flips` : ''}`);
		else worst = Math.max(worst, r.ratio);
	});
	return bad.length ? {pass: false, text: bad.join('; ')} : {pass: true, text: worst.toExponential(1)};
}

// ---- statistics ----

function median(xs) {
	const s = [...xs].sort((a, b) => a - b);
	const m = s.length >> 1;
	return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

// Min, 10th percentile, median, 90th percentile of per-call times (ns):
// the spread that says how noisy a run was.
function spread(xs) {
	const s = [...xs].sort((a, b) => a - b);
	const at = (q) => s[Math.min(s.length - 1, Math.floor(q * s.length))];
	return {n: s.length, min: s[0], p10: at(0.1), median: median(s), p90: at(0.9)};
}

// ---- one model ----

// Calls per side: enough to fill the budget at the per-call time t (ns),
// at least minReps, or exactly --reps.
function repsFor(opts, t) {
	if (opts.reps) return Math.max(opts.reps, 1);
	return Math.max(opts.minReps, Math.ceil(opts.budget * 1e9 / Math.max(t, 1)));
}

// ORT's options for the given intra-op threads: one inter-op thread and
// sequential execution either way, so that only the intra-op pool (which
// splits an operator's work, as modelc's workers split a loop) differs.
function sessionOptions(threads) {
	return {
		intraOpNumThreads: threads, interOpNumThreads: 1, executionMode: 'sequential',
		graphOptimizationLevel: 'all', logSeverityLevel: 3,
	};
}

// ORT's session on the given intra-op threads and the seeded inputs;
// row[errorKey] says why not.
async function openOrt(ort, m, row, threads = 1, errorKey = 'ortError') {
	let session;
	try {
		session = await ort.InferenceSession.create(m.model, sessionOptions(threads));
	} catch (e) {
		row[errorKey] = `ORT cannot load the model: ${e.message.split('\n')[0]}`;
		return {};
	}
	try {
		return {session, feeds: makeFeeds(ort, session, parsePins(m.pins), Number(m.seed), m.scale)};
	} catch (e) {
		row[errorKey] = e.message;
		return {session};
	}
}

// The driver on ORT's inputs (written as files in NAME.json's input order).
function startDriver(m, row, feeds) {
	const inDir = path.join(m.dir, 'inputs');
	fs.mkdirSync(inDir, {recursive: true});
	const files = [];
	for (const [i, d] of row.manifest.inputs.entries()) {
		const t = feeds[d.name];
		if (!t) {
			row.modelcError = `ORT has no input '${d.name}'`;
			return null;
		}
		files.push(path.join(inDir, `${i}.bin`));
		fs.writeFileSync(files[i], Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength));
	}
	return new Driver(path.join(m.dir, 'driver'), files);
}

// Warm-up, which also gives the outputs to check and a first estimate of
// a call (ns); where calls are cheap, the best of three more refines it (a
// call the scheduler preempted would otherwise cut the reps short).
// threaded: NAME_run_threads on the driver's pool, its outputs in out-threads.
async function warmModelc(driver, m, row, opts, threaded = false) {
	const outDir = path.join(m.dir, threaded ? 'out-threads' : 'out');
	fs.mkdirSync(outDir, {recursive: true});
	try {
		let est = Number(await driver.ok(`${threaded ? 't' : ''}write ${outDir}`));
		if (est < opts.budget * 1e9 / 4) est = Math.min(...await driver.run(3, threaded));
		return {est, outDir};
	} catch (e) {
		row[threaded ? 'modelcThreadsError' : 'modelcError'] = `run failed: ${e.message}`;
		return {};
	}
}

async function warmOrt(session, feeds, row, opts, errorKey = 'ortError') {
	try {
		const t0 = process.hrtime.bigint();
		const results = await session.run(feeds);
		let est = Number(process.hrtime.bigint() - t0);
		if (est < opts.budget * 1e9 / 4) est = Math.min(...await timeSession(session, feeds, 3));
		return {est, results};
	} catch (e) {
		row[errorKey] = `ORT run failed: ${e.message.split('\n')[0]}`;
		return {};
	}
}

// modelc's N-worker outputs against its one-thread ones, byte for byte:
// the work is split so that N does not change a bit (issue 23).
function sameBytes(manifest, oneDir, manyDir) {
	const bad = [];
	manifest.outputs.forEach((o, k) => {
		const a = fs.readFileSync(path.join(oneDir, `${k}.bin`)), b = fs.readFileSync(path.join(manyDir, `${k}.bin`));
		if (a.length !== b.length) {
			bad.push(`${o.name}: ${b.length} bytes, one thread ${a.length}`);
		} else if (!a.equals(b)) {
			let n = 0;
			for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) n++;
			bad.push(`${o.name}: ${n} of ${a.length} bytes differ`);
		}
	});
	return bad.length ? {same: false, text: bad.join('; ')} : {same: true};
}

// Rounds of batches: more rounds interleave the sides more finely, against
// drifting load; each batch still long enough that switching costs nothing.
const maxRounds = 20;

// ORT's intra-op workers spin for a while after a run before they sleep
// (~50 ms on this machine, a core's worth): the next side's calls would
// share the cores with them. Waits (at most 1 s) until this process is
// idle again: under a fifth of a core over 10 ms.
async function settle() {
	for (let i = 0; i < 100; i++) {
		const c = process.cpuUsage();
		await new Promise((resolve) => setTimeout(resolve, 10));
		const d = process.cpuUsage(c);
		if (d.user + d.system < 2000) return;
	}
}

// Interleaved rounds of batches over the sides, in their order, reversed
// every other round so that no side always runs right after another.
// Each side: {reps, run(n) -> times (ns), fail(error), times}, and
// optionally warm (a batch starts with one untimed call: a pool's first
// call after the other sides' runs can take twice as long, its threads
// placed on one core until the scheduler spreads them) and after (awaited
// after each batch); a side with batchOf (the Identity model) runs batches
// as long as that side's (at least 50 calls) while that side runs. A side
// that fails stops.
async function timeRounds(sides) {
	const timed = sides.filter((s) => !s.batchOf);
	const rounds = Math.max(1, Math.min(maxRounds, ...timed.map((s) => s.reps).filter((r) => r > 0)));
	for (const s of timed) s.batch = Math.ceil(s.reps / rounds);
	for (const s of sides) if (s.batchOf) s.batch = Math.max(s.batchOf.batch, 50);
	const live = (s) => (s.batchOf || s).reps > 0;
	for (let r = 0; r < rounds; r++) {
		for (const s of r % 2 ? [...sides].reverse() : sides) {
			if (!live(s)) continue;
			try {
				if (s.warm) await s.run(1);
				s.times.push(...await s.run(s.batch));
			} catch (e) {
				s.fail(e);
				(s.batchOf || s).reps = 0;
			}
			if (s.after) await s.after();
		}
	}
}

async function benchModel(ort, identity, m, opts) {
	const row = {name: m.name, macs: null};
	const threaded = opts.threads > 1;
	const manifestPath = path.join(m.dir, `${m.name}.json`);
	if (fs.existsSync(manifestPath)) row.manifest = JSON.parse(fs.readFileSync(manifestPath, 'utf8'));
	row.macs = row.manifest && typeof row.manifest.macs === 'number' ? row.manifest.macs : null;
	const {session, feeds} = await openOrt(ort, m, row);
	const many = threaded ? await openOrt(ort, m, row, opts.threads, 'ortThreadsError') : {};
	if (m.status !== 'ok') row.modelcError = m.status;
	else if (!feeds) row.modelcError = 'no inputs (see ORT)';
	let driver = null;
	const side = (run, fail) => ({reps: 0, run, fail, times: []});
	const modelc = side((n) => driver.run(n), (e) => { row.modelcError = `run failed: ${e.message}`; });
	const modelcN = side((n) => driver.run(n, true), (e) => { row.modelcThreadsError = `run failed: ${e.message}`; });
	const ortFail = (key) => (e) => { row[key] = `ORT run failed: ${e.message.split('\n')[0]}`; };
	const ort1 = side((n) => timeSession(session, feeds, n), ortFail('ortError'));
	const ortN = side((n) => timeSession(many.session, many.feeds, n), ortFail('ortThreadsError'));
	const ident = {...side((n) => timeSession(identity.session, identity.feeds, n), ortFail('ortError')), batchOf: ort1};
	try {
		driver = row.modelcError ? null : startDriver(m, row, feeds);
		const mw = driver ? await warmModelc(driver, m, row, opts) : {};
		const mwN = threaded && mw.outDir ? await warmModelc(driver, m, row, opts, true) : {};
		const ow = feeds ? await warmOrt(session, feeds, row, opts) : {};
		const owN = many.feeds ? await warmOrt(many.session, many.feeds, row, opts, 'ortThreadsError') : {};
		if (threaded) await settle();
		await timeSession(identity.session, identity.feeds, 50);
		if (mw.outDir && ow.results) row.check = checkOutputs(row.manifest, mw.outDir, ow.results, parseMaskFlips(m.compare));
		if (mw.outDir && mwN.outDir) row.identical = sameBytes(row.manifest, mw.outDir, mwN.outDir);
		modelc.reps = row.modelcError ? 0 : repsFor(opts, mw.est);
		modelcN.reps = row.modelcError || !mwN.outDir ? 0 : repsFor(opts, mwN.est);
		ort1.reps = row.ortError || !feeds ? 0 : repsFor(opts, ow.est);
		ortN.reps = !owN.results ? 0 : repsFor(opts, owN.est);
		if (threaded) {
			for (const s of [modelc, ort1, modelcN, ortN]) s.warm = true;
			ortN.after = settle;
		}
		await timeRounds(threaded ? [modelc, ort1, modelcN, ortN, ident] : [modelc, ort1, ident]);
	} finally {
		if (driver) driver.close();
		if (session) await session.release();
		if (many.session) await many.session.release();
	}
	if (modelc.times.length && !row.modelcError) row.modelc = spread(modelc.times);
	if (ort1.times.length) {
		row.identity = median(ident.times);
		row.ortRaw = spread(ort1.times);
		row.ort = {median: row.ortRaw.median - row.identity, n: ort1.times.length};
	}
	if (threaded) {
		row.threads = opts.threads;
		if (modelcN.times.length && !row.modelcError && !row.modelcThreadsError) row.modelcThreads = spread(modelcN.times);
		if (ortN.times.length) {
			row.ortThreadsRaw = spread(ortN.times);
			row.ortThreads = {median: row.ortThreadsRaw.median - row.identity, n: ortN.times.length};
		}
	}
	return row;
}

// The peak loop's figure (GFLOP/s), 0 if it fails: on a core whose FMA
// units a hidden sibling thread shares, single figures vary by up to 2x,
// so the harness keeps the best of several taken through the run.
function measurePeak(cmd) {
	try {
		return Number(execFileSync(cmd, ['0.25'], {encoding: 'utf8'}).split(' ')[1]) || 0;
	} catch (e) {
		return 0;
	}
}

// ---- the table ----

// x / div with the given digits; '-' when x is missing.
function fmt(x, digits, div = 1) {
	return typeof x !== 'number' || !Number.isFinite(x) ? '-' : (x / div).toFixed(digits);
}

function gflops(macs, ns) {
	return macs && ns > 0 ? 2 * macs / ns : null;
}

// An error as one table cell's text.
function cell(text) {
	return text.replace(/\|/g, '/').replace(/\s+/g, ' ').slice(0, 200);
}

// The "outputs vs ORT" cell: modelc's one-thread outputs against ORT's.
function checkCell(r) {
	let check;
	if (r.modelcError) check = `**FAILED: ${cell(r.modelcError)}**`;
	else if (!r.check) check = `- (${r.ortError || 'not compared'})`;
	else if (r.check.pass) check = `ok (${r.check.text})`;
	else check = `**WRONG: ${r.check.text.replace(/\|/g, '/')}**`;
	if (r.ortError && !r.modelcError && r.check) check += `; ORT: ${r.ortError}`;
	return check;
}

// A wrong result must not look fast: its figures are struck out.
function striker(wrong) {
	return (s) => wrong && s !== '-' ? `~~${s}~~` : s;
}

function tableLines(rows, peak) {
	const lines = [
		'| model | MACs (M) | modelc median (us) | ORT median - Identity (us) | modelc/ORT | modelc GFLOP/s | ORT GFLOP/s | modelc % peak | ORT % peak | outputs vs ORT | reps modelc/ORT |',
		'|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|',
	];
	for (const r of rows) {
		const mc = r.modelc ? r.modelc.median : null, or = r.ort ? r.ort.median : null;
		const gm = gflops(r.macs, mc), go = gflops(r.macs, or);
		const check = checkCell(r);
		const strike = striker(r.check && !r.check.pass);
		lines.push(`| ${r.name} | ${fmt(r.macs, 1, 1e6)} | ${strike(fmt(mc, 1, 1e3))} | ${fmt(or, 1, 1e3)} | ` +
			`${strike(fmt(mc && or ? mc / or : null, 2))} | ${strike(fmt(gm, 1))} | ${fmt(go, 1)} | ` +
			`${strike(fmt(gm && peak ? 100 * gm / peak : null, 1))} | ${fmt(go && peak ? 100 * go / peak : null, 1)} | ` +
			`${check} | ${r.modelc ? r.modelc.n : 0}/${r.ort ? r.ort.n : 0} |`);
	}
	return lines;
}

// The medians of one row under --threads N (ns; null where missing), and
// whether its N-worker figures stand: outputs right and bit-identical.
function threadFigures(r) {
	const med = (x) => x ? x.median : null;
	return {
		m1: med(r.modelc), mN: med(r.modelcThreads), o1: med(r.ort), oN: med(r.ortThreads),
		wrong1: !!(r.check && !r.check.pass), wrongN: !!(r.check && !r.check.pass) || !!(r.identical && !r.identical.same),
	};
}

const ratio = (a, b) => a && b ? a / b : null;

// --threads N: each thread count's medians, the speedups N against 1, and
// modelc against ORT at both.
function threadsTableLines(rows, n) {
	const lines = [
		`| model | MACs (M) | modelc 1 thread (us) | modelc ${n} workers (us) | modelc speedup | ORT 1 thread (us) | ORT ${n} threads (us) | ORT speedup | ` +
			`modelc/ORT, 1 thread | modelc/ORT, ${n} threads | ${n} workers vs 1 | outputs vs ORT | reps modelc 1/${n}, ORT 1/${n} |`,
		'|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---:|',
	];
	for (const r of rows) {
		const f = threadFigures(r);
		const s1 = striker(f.wrong1), sN = striker(f.wrongN);
		let same;
		if (r.modelcError) same = '-';
		else if (r.modelcThreadsError) same = `**FAILED: ${cell(r.modelcThreadsError)}**`;
		else if (!r.identical) same = '-';
		else same = r.identical.same ? 'bit-identical' : `**DIFFERENT: ${cell(r.identical.text)}**`;
		let check = checkCell(r);
		if (r.ortThreadsError) check += `; ORT ${n} threads: ${cell(r.ortThreadsError)}`;
		const reps = [r.modelc, r.modelcThreads, r.ort, r.ortThreads].map((x) => x ? x.n : 0);
		lines.push(`| ${r.name} | ${fmt(r.macs, 1, 1e6)} | ${s1(fmt(f.m1, 1, 1e3))} | ${sN(fmt(f.mN, 1, 1e3))} | ` +
			`${sN(fmt(ratio(f.m1, f.mN), 2))} | ${fmt(f.o1, 1, 1e3)} | ${fmt(f.oN, 1, 1e3)} | ${fmt(ratio(f.o1, f.oN), 2)} | ` +
			`${s1(fmt(ratio(f.m1, f.o1), 2))} | ${sN(fmt(ratio(f.mN, f.oN), 2))} | ${same} | ${check} | ` +
			`${reps[0]}/${reps[1]}, ${reps[2]}/${reps[3]} |`);
	}
	return lines;
}

// Over the models of more than 100 M MACs (the ones issue 23's acceptance
// names), the worst and the geometric mean of modelc's speedup and of
// modelc/ORT at N threads; rows that failed or differ are left out.
function threadsSummary(rows, n) {
	const big = rows.map(threadFigures).filter((f, i) => rows[i].macs > 100e6 && !f.wrongN);
	const speedups = big.map((f) => ratio(f.m1, f.mN)).filter((x) => x);
	const ratios = big.map((f) => ratio(f.mN, f.oN)).filter((x) => x);
	const geomean = (xs) => Math.exp(xs.reduce((a, x) => a + Math.log(x), 0) / xs.length);
	// "min 1.52, geometric mean 1.61 (2 models)", or '-' where none
	const sum = (xs, worst, what) => xs.length ? `${what} ${fmt(worst(...xs), 2)}, geometric mean ${fmt(geomean(xs), 2)} (${xs.length} models)` : '-';
	return `- models over 100 M MACs: modelc ${n} workers against 1, speedup ${sum(speedups, Math.min, 'min')}; ` +
		`modelc/ORT at ${n} threads ${sum(ratios, Math.max, 'max')}`;
}

function report(rows, opts) {
	const ids = rows.map((r) => r.identity).filter((x) => x);
	const threaded = opts.threads > 1;
	const lines = threaded ? threadsTableLines(rows, opts.threads) : tableLines(rows, opts.peak);
	lines.push('');
	if (threaded) lines.push(threadsSummary(rows, opts.threads));
	lines.push(`- ORT Identity overhead (Node binding, per call, subtracted): ${ids.length ? ids.map((x) => fmt(x, 1, 1e3)).join(', ') + ' us (per model)' : '-'}`);
	lines.push(`- peak: ${fmt(opts.peak, 1)} GFLOP/s f32 FMA, one core (bench/peak.c; the best of ${opts.peaks.length} ` +
		`measurements in this run: ${opts.peaks.map((p) => fmt(p, 1)).join(', ')})`);
	for (const i of opts.info) {
		const eq = i.indexOf('=');
		lines.push(`- ${i.slice(0, eq)}: ${i.slice(eq + 1)}`);
	}
	return lines.join('\n') + '\n';
}

// RESULTS.md: the latest table between markers, and a history that grows.
// threads > 1: a section of its own (the one-thread table stays).
function writeResults(file, table, title, threads = 1) {
	const tag = threads > 1 ? ` --threads ${threads}` : '';
	const begin = `<!-- latest: bench/run${tag} --write replaces this section -->`;
	const end = `<!-- end latest${tag} -->`;
	const histHead = '## History';
	let text = fs.existsSync(file) ? fs.readFileSync(file, 'utf8') : '# Benchmark results\n\n';
	if (threads > 1) title += `, ${threads} threads`;
	const latest = `${begin}\n## Latest: ${title}\n\n${table}${end}\n`;
	const a = text.indexOf(begin), b = text.indexOf(end);
	if (a >= 0 && b > a) text = text.slice(0, a) + latest + text.slice(b + end.length + 1);
	else {
		// A first --threads table goes right after the one-thread one.
		const oneEnd = '<!-- end latest -->\n', o = threads > 1 ? text.indexOf(oneEnd) : -1;
		const h = text.indexOf(histHead);
		if (o >= 0) text = text.slice(0, o + oneEnd.length) + '\n' + latest + text.slice(o + oneEnd.length);
		else text = h >= 0 ? text.slice(0, h) + latest + '\n' + text.slice(h) : text + '\n' + latest;
	}
	if (text.indexOf(histHead) < 0) text += `\n${histHead}\n\nEvery \`bench/run --write\`, oldest first.\n`;
	text += `\n### ${title}\n\n${table}`;
	fs.writeFileSync(file, text);
}

async function main() {
	const opts = parseArgs(process.argv.slice(2));
	let ort;
	try {
		ort = require(ortDir);
	} catch (e) {
		die(`cannot load onnxruntime-node from ${path.relative(root, ortDir)} (${e.message.split('\n')[0]}); run scripts/install-deps --npm-only`);
	}
	const plan = fs.readFileSync(opts.pos[0], 'utf8').split('\n').filter((l) => l).map((l) => {
		const [name, status, dir, model, pins, seed, scale, compare] = l.split('\t');
		return {name, status, dir, model, pins, seed, scale, compare};
	});
	const identity = {
		session: await ort.InferenceSession.create(identityModel(), sessionOptions(1)),
		feeds: {x: new ort.Tensor('float32', new Float32Array([1]), [1])},
	};
	const rows = [];
	const peaks = [opts.peak];
	for (const m of plan) {
		const t0 = Date.now();
		process.stderr.write(`bench: ${m.name} ...`);
		try {
			rows.push(await benchModel(ort, identity, m, opts));
		} catch (e) {
			// This file's own fault: the row says so, the others still run.
			rows.push({name: m.name, macs: null, modelcError: `harness error: ${e.message.split('\n')[0]}`});
			process.stderr.write(`\n${e.stack}\n`);
			process.exitCode = 2;
		}
		if (opts.peakCmd) peaks.push(measurePeak(opts.peakCmd));
		process.stderr.write(` ${((Date.now() - t0) / 1e3).toFixed(1)} s\n`);
	}
	opts.peaks = peaks.filter((p) => p > 0);
	opts.peak = Math.max(0, ...opts.peaks);
	const table = report(rows, opts);
	if (opts.json) {
		const figures = rows.map(({manifest, ...r}) => ({...r, gflopsModelc: r.modelc ? gflops(r.macs, r.modelc.median) : null,
			gflopsOrt: r.ort ? gflops(r.macs, r.ort.median) : null,
			...(opts.threads > 1 ? {
				gflopsModelcThreads: r.modelcThreads ? gflops(r.macs, r.modelcThreads.median) : null,
				gflopsOrtThreads: r.ortThreads ? gflops(r.macs, r.ortThreads.median) : null,
			} : {})}));
		const threads = opts.threads > 1 ? {threads: opts.threads} : {};
		fs.writeFileSync(opts.json, JSON.stringify({peak: opts.peak, ...threads, info: opts.info, models: figures}, null, 1) + '\n');
	}
	process.stdout.write('\n' + table);
	if (opts.write) {
		const info = Object.fromEntries(opts.info.map((i) => [i.slice(0, i.indexOf('=')), i.slice(i.indexOf('=') + 1)]));
		writeResults(opts.write, table, `${info.date || new Date().toISOString()}, ${info.revision || 'unknown revision'}`, opts.threads);
		process.stderr.write(`bench: wrote ${path.relative(process.cwd(), opts.write)}\n`);
	}
}

main().catch((e) => die(e.stack || String(e)));
