import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
	NAN_COLOR,
	NEGINF_COLOR,
	POSINF_COLOR,
	cellColor,
	cellPosition,
	classify,
	colormap,
	decodeCell,
	finiteRange,
	formatNumber,
	heatmapPixels,
	histogramBars,
	leadingAxes,
	scaleRange,
	sliceLabel,
	toMatrix,
} from '../webview/render';

describe('cells', () => {
	test('NaN and Inf come as strings', () => {
		assert.ok(Number.isNaN(decodeCell('nan')));
		assert.equal(decodeCell('inf'), Infinity);
		assert.equal(decodeCell('-inf'), -Infinity);
		assert.ok(Number.isNaN(decodeCell(null)));
		assert.equal(decodeCell(1.5), 1.5);
		assert.deepEqual([NaN, Infinity, -Infinity, 0].map(classify), ['nan', 'posinf', 'neginf', 'finite']);
	});

	test('0-D, 1-D and 2-D data become rows', () => {
		assert.deepEqual(toMatrix(3), [[3]]);
		assert.deepEqual(toMatrix([1, 'inf']), [[1, Infinity]]);
		assert.deepEqual(toMatrix([[1, 2], ['-inf', 4]]), [[1, 2], [-Infinity, 4]]);
		assert.deepEqual(toMatrix([]), []);
	});
});

describe('colours', () => {
	test('the scale runs from dark purple to yellow, clamped', () => {
		assert.deepEqual(colormap(0), [68, 1, 84]);
		assert.deepEqual(colormap(1), [253, 231, 37]);
		assert.deepEqual(colormap(-5), colormap(0));
		assert.deepEqual(colormap(7), colormap(1));
	});

	test('NaN and Inf cells have their own colours, off the scale', () => {
		assert.deepEqual(cellColor(NaN, 0, 1), NAN_COLOR);
		assert.deepEqual(cellColor(Infinity, 0, 1), POSINF_COLOR);
		assert.deepEqual(cellColor(-Infinity, 0, 1), NEGINF_COLOR);
		const onScale = new Set(Array.from({ length: 101 }, (_, i) => colormap(i / 100).join()));
		for (const c of [NAN_COLOR, POSINF_COLOR, NEGINF_COLOR]) {
			assert.ok(!onScale.has(c.join()), `${c} is not on the scale`);
		}
		assert.deepEqual(cellColor(5, 5, 5), colormap(0.5), 'a constant slice is mid-scale');
	});

	test('the heatmap has one RGBA pixel per cell', () => {
		const m = [
			[0, 1],
			[NaN, Infinity],
		];
		const { width, height, pixels } = heatmapPixels(m, 0, 1);
		assert.equal(width, 2);
		assert.equal(height, 2);
		assert.deepEqual(Array.from(pixels.slice(0, 4)), [...colormap(0), 255]);
		assert.deepEqual(Array.from(pixels.slice(4, 8)), [...colormap(1), 255]);
		assert.deepEqual(Array.from(pixels.slice(8, 12)), [...NAN_COLOR, 255]);
		assert.deepEqual(Array.from(pixels.slice(12, 16)), [...POSINF_COLOR, 255]);
	});

	test('the finite range and the counts of the slice', () => {
		assert.deepEqual(finiteRange([[1, NaN], [-Infinity, -2], [Infinity, NaN]]), { lo: -2, hi: 1, nan: 2, posinf: 1, neginf: 1 });
		assert.deepEqual(finiteRange([[NaN]]), { lo: 0, hi: 0, nan: 1, posinf: 0, neginf: 0 });
	});
});

describe('the diverging scale of an error', () => {
	test('is centred on 0: white there, blue below, red above, and its ends symmetric', () => {
		assert.deepEqual(scaleRange(-0.5, 2, 'diverging'), { lo: -2, hi: 2 });
		assert.deepEqual(scaleRange(-0.5, 2), { lo: -0.5, hi: 2 });
		assert.deepEqual(cellColor(0, -2, 2, 'diverging'), [247, 247, 247]);
		const [rb, , bb] = cellColor(-1.5, -2, 2, 'diverging');
		const [ra, , ba] = cellColor(1.5, -2, 2, 'diverging');
		assert.ok(bb > rb && ra > ba, 'negative errors blue, positive red');
		assert.deepEqual(cellColor(NaN, -2, 2, 'diverging'), NAN_COLOR);
		const { pixels } = heatmapPixels([[-2, 0, 2]], -2, 2, 'diverging');
		assert.deepEqual(Array.from(pixels.slice(4, 7)), [247, 247, 247]);
	});
});

describe('slices', () => {
	test('labels in index notation', () => {
		assert.equal(sliceLabel([1, 64, 112, 112], [0, 3], [1, 1]), '[0, 3, :, :]');
		assert.equal(sliceLabel([1, 64, 1024, 1024], [0, 3], [4, 4]), '[0, 3, ::4, ::4]');
		assert.equal(sliceLabel([10, 20], [], [1, 2]), '[:, ::2]');
	});

	test('index pickers for the leading axes of 3-D and 4-D tensors', () => {
		assert.deepEqual(leadingAxes([1, 64, 112, 112]), [1, 64]);
		assert.deepEqual(leadingAxes([3, 5, 7]), [3]);
		assert.deepEqual(leadingAxes([5, 7]), []);
		assert.deepEqual(leadingAxes([7]), []);
	});

	test('a cell of the downsampled slice maps back into the tensor', () => {
		assert.deepEqual(cellPosition([0, 3], [2, 4], 5, 6, 2), [0, 3, 10, 24]);
		assert.deepEqual(cellPosition([], [3], 0, 4, 1), [12]);
		assert.deepEqual(cellPosition([], [], 0, 0, 0), []);
	});
});

describe('histogram', () => {
	test('bars fill the box, the tallest to the top', () => {
		const bars = histogramBars([1, 4, 2, 0], 100, 50);
		assert.equal(bars.length, 4);
		assert.equal(bars[1].height, 50);
		assert.equal(bars[1].y, 0);
		assert.equal(bars[0].height, 12.5);
		assert.equal(bars[3].height, 0);
		assert.equal(bars[3].x, 75);
	});

	test('log counts lift the small bins', () => {
		const lin = histogramBars([1, 1000], 10, 100);
		const log = histogramBars([1, 1000], 10, 100, true);
		assert.ok(log[0].height > lin[0].height * 10);
		assert.deepEqual(histogramBars([], 10, 10), []);
	});
});

test('numbers are printed short', () => {
	assert.equal(formatNumber(3), '3');
	assert.equal(formatNumber(0.123456), '0.1235');
	assert.equal(formatNumber(1.5e-7), '1.500e-7');
	assert.equal(formatNumber('nan'), 'NaN');
	assert.equal(formatNumber('-inf'), '-Inf');
	assert.equal(formatNumber(null), '-');
});
