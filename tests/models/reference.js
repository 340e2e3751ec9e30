#!/usr/bin/env node
// Reference outputs of a model from ONNX Runtime (onnxruntime-node, installed
// by scripts/install-deps into .cache/npm-tools/).
//
// usage: node tests/models/reference.js MODEL DIR [--seed N] [--scale S|LO:HI]
//                 [--pin NAME=DIMS]... [--fill NAME=VALUE]... [--inputs-from DIR0] [--no-opt]
//
// Generates one input per graph input from a seeded PRNG (uniform in
// [-S, S], default S = 1; --scale LO:HI: uniform in [LO, HI]), or reuses
// DIR0's inputs, runs ONNX Runtime on one
// thread, and writes:
//   DIR/inputs/FILE.bin   each input, raw little-endian
//   DIR/outputs/FILE.bin  each output, raw little-endian
//   DIR/inputs.tsv, DIR/outputs.tsv   NAME, FILE, dtype, dims (like 1x3x8x8)
// FILE is the value's name with every byte outside [A-Za-z0-9_.-] replaced
// by '_', as `modelc run` names its outputs. --fill NAME=VALUE gives every
// element of input NAME the value VALUE instead (any numeric dtype: an
// integer input such as silero VAD's sample rate `sr`). --no-opt turns ONNX Runtime's
// graph optimisations off (a second, slightly different answer, used to
// check this pipeline itself). Exits 77 when onnxruntime-node is missing.
'use strict';
const fs = require('fs');
const path = require('path');

const root = path.resolve(__dirname, '..', '..');
const ortDir = path.join(root, '.cache', 'npm-tools', 'node_modules', 'onnxruntime-node');

function die(msg, code = 1) {
	process.stderr.write(`reference.js: ${msg}\n`);
	process.exit(code);
}

function parseArgs(argv) {
	const a = {pins: {}, fills: {}, seed: 1, scale: 1, noOpt: false, inputsFrom: null, pos: []};
	for (let i = 0; i < argv.length; i++) {
		const arg = argv[i];
		const next = () => {
			if (i + 1 >= argv.length) die(`${arg} needs a value`, 2);
			return argv[++i];
		};
		if (arg === '--seed') a.seed = Number(next());
		else if (arg === '--scale') {
			const v = next(), colon = v.indexOf(':');
			if (colon >= 0) [a.lo, a.hi] = [Number(v.slice(0, colon)), Number(v.slice(colon + 1))];
			else a.scale = Number(v);
		}
		else if (arg === '--no-opt') a.noOpt = true;
		else if (arg === '--inputs-from') a.inputsFrom = next();
		else if (arg === '--fill') {
			const v = next(), eq = v.lastIndexOf('=');
			if (eq <= 0 || !Number.isFinite(Number(v.slice(eq + 1)))) die(`--fill expects NAME=NUMBER, got '${v}'`, 2);
			a.fills[v.slice(0, eq)] = Number(v.slice(eq + 1));
		}
		else if (arg === '--pin') {
			const v = next(), eq = v.lastIndexOf('=');
			if (eq <= 0) die(`--pin expects NAME=DIMS, got '${v}'`, 2);
			a.pins[v.slice(0, eq)] = parseDims(v.slice(eq + 1));
		} else if (arg.startsWith('--')) die(`unknown option '${arg}'`, 2);
		else a.pos.push(arg);
	}
	if (a.pos.length !== 2) die('usage: reference.js MODEL DIR [--seed N] [--scale S|LO:HI] [--pin NAME=DIMS]... [--fill NAME=VALUE]... [--inputs-from DIR0] [--no-opt]', 2);
	if (!Number.isInteger(a.seed) || !(a.scale > 0)) die('--seed must be an integer and --scale positive', 2);
	if (a.lo === undefined) [a.lo, a.hi] = [-a.scale, a.scale];
	if (!(a.lo < a.hi)) die('--scale LO:HI needs LO < HI', 2);
	return a;
}

function parseDims(text) {
	if (text === 'scalar') return [];
	const dims = text.split('x').map(Number);
	if (!dims.every((d) => Number.isInteger(d) && d >= 0)) die(`'${text}' is not a shape like 1x3x224x224`, 2);
	return dims;
}

// The file name `modelc run` gives a value: bytes outside [A-Za-z0-9_.-]
// become '_' (so a multi-byte UTF-8 character becomes several).
function fileName(valueName) {
	let s = '';
	for (const b of Buffer.from(valueName, 'utf8')) {
		const c = String.fromCharCode(b);
		s += /[A-Za-z0-9_.-]/.test(c) ? c : '_';
	}
	return s + '.bin';
}

// mulberry32: a tiny PRNG with a 32-bit state, so that the inputs are the
// same on every machine and Node version. Returns floats in [0, 1).
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

const generated = {float32: Float32Array, float64: Float64Array};
// the dtypes --fill may give
const filled = {...generated, int64: BigInt64Array, int32: Int32Array, int8: Int8Array, uint8: Uint8Array, bool: Uint8Array};

function inputShape(meta, pins) {
	const pin = pins[meta.name];
	if (pin) {
		if (pin.length !== meta.shape.length) die(`--pin ${meta.name}: rank ${pin.length}, but the model's input has rank ${meta.shape.length}`, 2);
		return pin;
	}
	meta.shape.forEach((d) => {
		if (typeof d !== 'number' || d < 0) die(`input '${meta.name}' has a symbolic dimension (${JSON.stringify(meta.shape)}): pin it with --pin ${meta.name}=DIMS`, 2);
	});
	return meta.shape;
}

function writeTsv(file, rows) {
	fs.writeFileSync(file, rows.map((r) => r.join('\t') + '\n').join(''));
}

function readTsv(file) {
	return fs.readFileSync(file, 'utf8').split('\n').filter((l) => l).map((l) => l.split('\t'));
}

function dimsText(dims) {
	return dims.length ? dims.join('x') : 'scalar';
}

function bytesOf(data) {
	return Buffer.from(data.buffer, data.byteOffset, data.byteLength);
}

async function main() {
	const args = parseArgs(process.argv.slice(2));
	let ort;
	try {
		ort = require(ortDir);
	} catch (e) {
		die(`cannot load onnxruntime-node from ${path.relative(root, ortDir)} (${e.message.split('\n')[0]}); run scripts/install-deps`, 77);
	}
	const [model, dir] = args.pos;
	const session = await ort.InferenceSession.create(model, {
		intraOpNumThreads: 1,
		interOpNumThreads: 1,
		executionMode: 'sequential',
		graphOptimizationLevel: args.noOpt ? 'disabled' : 'all',
		logSeverityLevel: 3,
	});
	fs.mkdirSync(path.join(dir, 'inputs'), {recursive: true});
	fs.mkdirSync(path.join(dir, 'outputs'), {recursive: true});

	const feeds = {};
	const inputRows = [];
	const reused = args.inputsFrom ? readTsv(path.join(args.inputsFrom, 'inputs.tsv')) : null;
	const random = mulberry32(args.seed);
	for (const meta of session.inputMetadata) {
		if (!meta.isTensor) die(`input '${meta.name}' is not a tensor`);
		const fill = args.fills[meta.name];
		const Array_ = (fill === undefined ? generated : filled)[meta.type];
		if (!Array_) die(`input '${meta.name}' is ${meta.type}; only float32 and float64 inputs are generated (others: --fill)`);
		const dims = inputShape(meta, args.pins);
		const numel = dims.reduce((p, d) => p * d, 1);
		let data;
		if (fill !== undefined) {
			data = new Array_(numel).fill(Array_ === BigInt64Array ? BigInt(fill) : fill);
		} else if (reused) {
			const row = reused.find((r) => r[0] === meta.name);
			if (!row) die(`${args.inputsFrom}/inputs.tsv has no input '${meta.name}'`);
			const buf = fs.readFileSync(path.join(args.inputsFrom, 'inputs', row[1]));
			data = new Array_(buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.byteLength));
			if (data.length !== numel) die(`reused input '${meta.name}' has ${data.length} elements, want ${numel}`);
		} else {
			data = new Array_(numel);
			// (the symmetric form as it always was: the same inputs as before LO:HI)
			if (args.lo === -args.scale && args.hi === args.scale)
				for (let i = 0; i < numel; i++) data[i] = (2 * random() - 1) * args.scale;
			else
				for (let i = 0; i < numel; i++) data[i] = args.lo + random() * (args.hi - args.lo);
		}
		feeds[meta.name] = new ort.Tensor(meta.type, data, dims);
		const file = fileName(meta.name);
		fs.writeFileSync(path.join(dir, 'inputs', file), bytesOf(data));
		inputRows.push([meta.name, file, meta.type, dimsText(dims)]);
	}
	writeTsv(path.join(dir, 'inputs.tsv'), inputRows);

	const results = await session.run(feeds);
	const outputRows = [];
	for (const name of session.outputNames) {
		const t = results[name];
		if (!t || t.type === 'string') die(`output '${name}' is missing or a string tensor`);
		const file = fileName(name);
		fs.writeFileSync(path.join(dir, 'outputs', file), bytesOf(t.data));
		outputRows.push([name, file, t.type, dimsText(t.dims)]);
	}
	writeTsv(path.join(dir, 'outputs.tsv'), outputRows);
	await session.release();
}

main().catch((e) => die(e.stack || String(e)));
