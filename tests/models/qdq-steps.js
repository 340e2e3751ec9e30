#!/usr/bin/env node
// The quantisation step of each output of a QDQ model: where an output is
// written by a DequantizeLinear, that DQ's scale; where a Softmax (through
// data movers: Reshape, Flatten, Squeeze, Unsqueeze, Transpose, Identity)
// reads a DequantizeLinear, the logits' step s and the bound tanh(s/2) that
// follows for the probabilities (tests/models/models.tsv says why). Used to
// derive the --abs-tol values of the int8 models in models.tsv.
//
// usage: node tests/models/qdq-steps.js MODEL.onnx...
//
// A minimal reader of ONNX's protobuf (no dependencies): graph nodes,
// initializers and Constant nodes' values, float32 scalars only.
'use strict';
const fs = require('fs');

// Fields of one protobuf message: [fieldNumber, wireType, value] where value
// is a Number (varint, fixed32/64 as raw offset) or a Buffer (length-delimited).
function fields(buf) {
	const out = [];
	let o = 0;
	const varint = () => {
		let v = 0, mul = 1, b;
		do {
			b = buf[o++];
			v += (b & 0x7f) * mul;
			mul *= 128;
		} while (b & 0x80);
		return v;
	};
	while (o < buf.length) {
		const key = varint(), num = Math.floor(key / 8), wt = key & 7;
		if (wt === 0) out.push([num, wt, varint()]);
		else if (wt === 1) { out.push([num, wt, buf.subarray(o, o + 8)]); o += 8; }
		else if (wt === 2) { const n = varint(); out.push([num, wt, buf.subarray(o, o + n)]); o += n; }
		else if (wt === 5) { out.push([num, wt, buf.subarray(o, o + 4)]); o += 4; }
		else throw new Error(`unsupported wire type ${wt}`);
	}
	return out;
}

const str = (b) => b.toString('utf8');

// TensorProto -> {name, values} (float32 only; others: values null)
function tensor(buf) {
	let name = '', type = 0, raw = null;
	const floats = [];
	for (const [n, wt, v] of fields(buf)) {
		if (n === 8) name = str(v);
		else if (n === 2) type = v;
		else if (n === 9) raw = v;
		else if (n === 4 && wt === 2) for (let i = 0; i + 4 <= v.length; i += 4) floats.push(v.readFloatLE(i));
		else if (n === 4 && wt === 5) floats.push(v.readFloatLE(0));
	}
	if (type === 2 || type === 3) { // uint8, int8: raw bytes or int32_data (field 5)
		const ints = [];
		if (raw) for (let i = 0; i < raw.length; i++) ints.push(type === 3 ? raw.readInt8(i) : raw[i]);
		for (const [n, wt, v] of fields(buf))
			if (n === 5 && wt === 0) ints.push(v);
			else if (n === 5 && wt === 2) // packed varints (int8 sign-extended to 64 bits)
				for (let o = 0; o < v.length;) {
					let x = 0, mul = 1, b;
					do { b = v[o++]; x += (b & 0x7f) * mul; mul *= 128; } while (b & 0x80);
					ints.push(x);
				}
		for (let i = 0; i < ints.length; i++) if (type === 3 && ints[i] > 127) ints[i] -= 2 ** 64;
		return {name, values: ints};
	}
	if (type !== 1) return {name, values: null};
	if (raw) for (let i = 0; i + 4 <= raw.length; i += 4) floats.push(raw.readFloatLE(i));
	return {name, values: floats};
}

function graphOf(file) {
	const model = fields(fs.readFileSync(file));
	const g = model.find(([n]) => n === 7);
	if (!g) throw new Error(`${file}: no graph`);
	const nodes = [], consts = {}, inputs = [], outputs = [];
	for (const [n, , v] of fields(g[2])) {
		if (n === 1) {
			const node = {inputs: [], outputs: [], op: '', attrs: []};
			for (const [m, , w] of fields(v)) {
				if (m === 1) node.inputs.push(str(w));
				else if (m === 2) node.outputs.push(str(w));
				else if (m === 4) node.op = str(w);
				else if (m === 5) node.attrs.push(w);
			}
			nodes.push(node);
			if (node.op === 'Constant')
				for (const a of node.attrs) {
					const t = fields(a).find(([m]) => m === 5);
					if (t) consts[node.outputs[0]] = tensor(t[2]).values;
				}
		} else if (n === 5) {
			const t = tensor(v);
			consts[t.name] = t.values;
		} else if (n === 11) {
			inputs.push(str(fields(v).find(([m]) => m === 1)[2]));
		} else if (n === 12) {
			outputs.push(str(fields(v).find(([m]) => m === 1)[2]));
		}
	}
	return {nodes, consts, inputs: inputs.filter((i) => !(i in consts)), outputs};
}

const movers = new Set(['Reshape', 'Flatten', 'Squeeze', 'Unsqueeze', 'Transpose', 'Identity']);

function main() {
	const files = process.argv.slice(2);
	if (!files.length) {
		process.stderr.write('usage: qdq-steps.js MODEL.onnx...\n');
		process.exit(2);
	}
	for (const file of files) {
		const {nodes, consts, inputs, outputs} = graphOf(file);
		const producer = {};
		for (const node of nodes) for (const o of node.outputs) producer[o] = node;
		const dqScale = (node) => {
			const s = consts[node.inputs[1]];
			return s && s.length === 1 ? s[0] : null;
		};
		// the inputs' range: what the QuantizeLinear reading each one covers
		for (const inp of inputs) {
			let v = inp, q;
			for (;;) {
				q = nodes.find((n) => n.inputs[0] === v);
				if (!q || !movers.has(q.op)) break;
				v = q.outputs[0];
			}
			if (q && q.op !== 'QuantizeLinear') q = null;
			const s = q && consts[q.inputs[1]];
			const zp = q && q.inputs[2] ? consts[q.inputs[2]][0] : 0;
			console.log(`${file}\tinput ${inp}\t` + (s && s.length === 1 ?
				`QuantizeLinear\tstep ${s[0]}, zero point ${zp}, range [${s[0] * (-128 - zp)}, ${s[0] * (127 - zp)}]` : 'no QuantizeLinear'));
		}
		for (const out of outputs) {
			let node = producer[out];
			let line = `${file}\t${out}\t`;
			if (node && node.op === 'DequantizeLinear' && dqScale(node) !== null) {
				line += `DequantizeLinear\tstep ${dqScale(node)}`;
			} else if (node && node.op === 'Softmax') {
				let p = producer[node.inputs[0]];
				while (p && movers.has(p.op)) p = producer[p.inputs[0]];
				if (p && p.op === 'DequantizeLinear' && dqScale(p) !== null) {
					const s = dqScale(p);
					line += `Softmax of DequantizeLinear\tlogits step ${s}, bound tanh(s/2) ${Math.tanh(s / 2)}, s/2 ${s / 2}`;
				} else line += 'Softmax of something else: no step';
			} else line += `${node ? node.op : 'graph input'}: no step`;
			console.log(line);
		}
	}
}

main();
