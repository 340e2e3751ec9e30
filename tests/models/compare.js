#!/usr/bin/env node
// Compares a model's outputs with reference outputs, file by file.
//
// usage: node tests/models/compare.js REFDIR OUTDIR [--tol T]
//                 [--abs-tol A] [--mask-flips NAME=F]... [--summary FILE]
//
// REFDIR is what reference.js wrote (outputs.tsv and outputs/FILE.bin);
// OUTDIR holds the candidate's raw FILE.bin files (as `modelc run` writes
// them). A floating-point output passes when
//     max|out - ref| <= T * max|ref|      (T = 1e-4 unless --tol)
// (NaN must match NaN); an integer or bool output must match exactly.
// --abs-tol A: the bound is A itself, not relative to max|ref| (the int8
// models: A is one quantisation step of the output, models.tsv says which);
// each line then also prints max|diff| / A ("of bound").
// --exact: every output must be bit-identical (float bits, NaN payloads
// included): two builds of the same model that must agree exactly.
// --mask-flips NAME=F lets up to a fraction F of NAME's elements be masked
// (exactly 0) on one side and not on the other: for outputs masked by a
// float Equal (a non-maximum suppression, say), where rounding flips a few
// ties. Every other element must still meet the bound, and the reported
// ratio is over those elements.
// Prints one line per output ("over": elements over the bound); --summary
// writes "OUTPUTS<TAB>MAX_RATIO<TAB>PASS|FAIL" to FILE. Exit status 0 when
// every output passes, 1 otherwise.
'use strict';
const fs = require('fs');
const path = require('path');

function die(msg, code = 2) {
	process.stderr.write(`compare.js: ${msg}\n`);
	process.exit(code);
}

function halfToFloat(h) {
	const sign = h & 0x8000 ? -1 : 1, exp = (h >> 10) & 0x1f, frac = h & 0x3ff;
	if (exp === 0) return sign * frac * 2 ** -24;
	if (exp === 31) return frac ? NaN : sign * Infinity;
	return sign * (1 + frac / 1024) * 2 ** (exp - 15);
}

// dtype -> [bytes per element, reader(Buffer, offset) -> Number, is float]
const readers = {
	float32: [4, (b, o) => b.readFloatLE(o), true],
	float64: [8, (b, o) => b.readDoubleLE(o), true],
	float16: [2, (b, o) => halfToFloat(b.readUInt16LE(o)), true],
	int8: [1, (b, o) => b.readInt8(o), false],
	uint8: [1, (b, o) => b.readUInt8(o), false],
	bool: [1, (b, o) => b.readUInt8(o), false],
	int16: [2, (b, o) => b.readInt16LE(o), false],
	uint16: [2, (b, o) => b.readUInt16LE(o), false],
	int32: [4, (b, o) => b.readInt32LE(o), false],
	uint32: [4, (b, o) => b.readUInt32LE(o), false],
	int64: [8, (b, o) => Number(b.readBigInt64LE(o)), false],
	uint64: [8, (b, o) => Number(b.readBigUInt64LE(o)), false],
};

// Two passes: max|ref| first, then the elements over the tolerance it sets.
function compareOne(ref, out, dtype, tol, allowedFraction, absTol, exact) {
	const [size, read, isFloat] = readers[dtype];
	if (ref.length !== out.length)
		return {error: `size ${out.length} bytes, reference ${ref.length} bytes`};
	const n = ref.length / size;
	let maxRef = 0;
	for (let o = 0; o < ref.length; o += size) {
		const r = Math.abs(read(ref, o));
		if (Number.isFinite(r)) maxRef = Math.max(maxRef, r);
	}
	if (exact) {
		let differ = 0, maxDiff = 0;
		for (let o = 0; o < ref.length; o += size) {
			if (ref.compare(out, o, o + size, o, o + size) !== 0) {
				differ++;
				const d = Math.abs(read(out, o) - read(ref, o));
				maxDiff = Math.max(maxDiff, Number.isNaN(d) ? Infinity : d);
			}
		}
		return {maxDiff, maxRef, ratio: maxRef > 0 ? maxDiff / maxRef : maxDiff ? Infinity : 0,
			over: differ, flips: 0, n, pass: differ === 0};
	}
	const bound = isFloat ? (absTol !== null ? absTol : tol * maxRef) : 0;
	let maxDiff = 0, over = 0, flips = 0;
	for (let o = 0; o < ref.length; o += size) {
		const r = read(ref, o), x = read(out, o);
		let diff;
		if (Number.isNaN(r) || Number.isNaN(x)) diff = Number.isNaN(r) === Number.isNaN(x) ? 0 : Infinity;
		else diff = r === x ? 0 : Math.abs(x - r); // r === x: also equal infinities
		if (diff > bound && allowedFraction > 0 && (r === 0) !== (x === 0)) {
			flips++;
			continue;
		}
		maxDiff = Math.max(maxDiff, diff);
		if (diff > bound) over++;
	}
	const ratio = maxDiff === 0 ? 0 : maxRef > 0 ? maxDiff / maxRef : Infinity;
	return {maxDiff, maxRef, ratio, over, flips, n,
		pass: over === 0 && flips <= Math.floor(allowedFraction * n)};
}

function main() {
	const argv = process.argv.slice(2), pos = [];
	let tol = 1e-4, summary = null, absTol = null, exact = false;
	const maskFlips = {};
	for (let i = 0; i < argv.length; i++) {
		if (argv[i] === '--tol' && i + 1 < argv.length) tol = Number(argv[++i]);
		else if (argv[i] === '--mask-flips' && i + 1 < argv.length) {
			const v = argv[++i], eq = v.lastIndexOf('='), frac = Number(v.slice(eq + 1));
			if (eq <= 0 || !(frac >= 0 && frac < 1)) die(`--mask-flips expects NAME=FRACTION, got '${v}'`);
			maskFlips[v.slice(0, eq)] = frac;
		}
		else if (argv[i] === '--summary' && i + 1 < argv.length) summary = argv[++i];
		else if (argv[i] === '--abs-tol' && i + 1 < argv.length) absTol = Number(argv[++i]);
		else if (argv[i] === '--exact') exact = true;
		else if (argv[i].startsWith('--')) die(`unknown option '${argv[i]}'`);
		else pos.push(argv[i]);
	}
	if (pos.length !== 2 || !(tol >= 0) || (absTol !== null && !(absTol > 0)))
		die('usage: compare.js REFDIR OUTDIR [--tol T | --abs-tol A | --exact] [--mask-flips NAME=FRACTION]... [--summary FILE]');
	const [refDir, outDir] = pos;
	const rows = fs.readFileSync(path.join(refDir, 'outputs.tsv'), 'utf8').split('\n').filter((l) => l).map((l) => l.split('\t'));

	let allPass = rows.length > 0, maxRatio = 0;
	const fmt = (x) => x.toExponential(3).padStart(11);
	console.log(`  ${'output'.padEnd(24)} ${'dtype'.padEnd(8)} ${'shape'.padEnd(16)} ${'max|diff|'.padStart(11)} ${'max|ref|'.padStart(11)} ${'ratio'.padStart(11)} ${'over'.padStart(7)}  result`);
	for (const [name, file, dtype, dims] of rows) {
		const head = `  ${name.padEnd(24)} ${dtype.padEnd(8)} ${dims.padEnd(16)}`;
		let r;
		if (!readers[dtype]) r = {error: `dtype ${dtype} is not compared`};
		else if (!fs.existsSync(path.join(outDir, file))) r = {error: `no output file ${file}`};
		else r = compareOne(fs.readFileSync(path.join(refDir, 'outputs', file)), fs.readFileSync(path.join(outDir, file)), dtype, tol, maskFlips[name] || 0, absTol, exact);
		if (r.error) {
			console.log(`${head} FAIL: ${r.error}`);
			allPass = false;
			maxRatio = Infinity;
			continue;
		}
		const allowed = maskFlips[name] ? ` (${r.flips} masked element(s) flipped; ${Math.floor(maskFlips[name] * r.n)} of ${r.n} allowed)` : '';
		const ofBound = absTol !== null && !exact ? ` (${(r.maxDiff / absTol).toFixed(4)} of bound ${absTol})` : '';
		const bits = exact ? (r.over ? ` (${r.over} of ${r.n} elements differ)` : ' (bit-identical)') : '';
		console.log(`${head} ${fmt(r.maxDiff)} ${fmt(r.maxRef)} ${fmt(r.ratio)} ${String(r.over).padStart(7)}  ${r.pass ? 'PASS' : 'FAIL'}${allowed}${ofBound}${bits}`);
		allPass = allPass && r.pass;
		maxRatio = Math.max(maxRatio, r.ratio);
	}
	if (!rows.length) console.log('  (the reference has no outputs)');
	if (summary) fs.writeFileSync(summary, `${rows.length}\t${maxRatio.toExponential(2)}\t${allPass ? 'PASS' : 'FAIL'}\n`);
	process.exit(allPass ? 0 : 1);
}

main();
