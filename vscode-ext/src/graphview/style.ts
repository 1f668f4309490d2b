/** The colours of node kinds (by op type, as Netron groups them) and of the view's marks. Pure. */
import type { RGB } from './overlay';

const CATEGORY: Record<string, string[]> = {
	layer: ['Conv', 'ConvTranspose', 'Gemm', 'MatMul', 'MatMulInteger', 'QLinearConv', 'QLinearMatMul', 'ConvInteger', 'Einsum', 'LSTM', 'GRU', 'RNN', 'Attention', 'MultiHeadAttention'],
	activation: ['Relu', 'LeakyRelu', 'PRelu', 'Sigmoid', 'Tanh', 'Softmax', 'LogSoftmax', 'Gelu', 'Elu', 'Selu', 'Celu', 'HardSigmoid', 'HardSwish', 'Softplus', 'Mish', 'Erf', 'Clip', 'ThresholdedRelu'],
	norm: ['BatchNormalization', 'LayerNormalization', 'InstanceNormalization', 'GroupNormalization', 'LRN', 'SimplifiedLayerNormalization', 'SkipLayerNormalization', 'RMSNormalization'],
	pool: ['MaxPool', 'AveragePool', 'GlobalAveragePool', 'GlobalMaxPool', 'LpPool', 'Resize', 'Upsample', 'ReduceMean', 'ReduceMax', 'ReduceSum', 'ReduceMin', 'ReduceProd'],
	shape: ['Reshape', 'Transpose', 'Flatten', 'Squeeze', 'Unsqueeze', 'Concat', 'Split', 'Slice', 'Gather', 'GatherElements', 'GatherND', 'Shape', 'Expand', 'Tile', 'Pad', 'Cast', 'Identity', 'ScatterND', 'Range', 'ConstantOfShape', 'Size', 'Where'],
	control: ['If', 'Loop', 'Scan'],
	quant: ['QuantizeLinear', 'DequantizeLinear', 'DynamicQuantizeLinear'],
	constant: ['Constant'],
};
const BY_OP = new Map<string, string>();
for (const [cat, ops] of Object.entries(CATEGORY)) for (const op of ops) BY_OP.set(op, cat);

export function category(op: string): string {
	return BY_OP.get(op.slice(op.lastIndexOf('.') + 1)) ?? 'other';
}

export interface Theme {
	background: RGB;
	foreground: RGB;
	muted: RGB;
	edge: RGB;
	group: RGB;
	groupBorder: RGB;
	selection: RGB;
	current: RGB;
	breakpoint: RGB;
	dark: boolean;
	fills: Record<string, RGB>;
}

const LIGHT_FILLS: Record<string, RGB> = {
	layer: [198, 219, 239],
	activation: [250, 205, 195],
	norm: [199, 233, 192],
	pool: [204, 235, 235],
	shape: [226, 226, 226],
	control: [221, 204, 238],
	quant: [253, 232, 180],
	constant: [240, 240, 240],
	other: [236, 236, 236],
	module: [246, 241, 226],
	io: [255, 255, 255],
};
const DARK_FILLS: Record<string, RGB> = {
	layer: [38, 73, 110],
	activation: [110, 50, 45],
	norm: [45, 90, 50],
	pool: [35, 85, 90],
	shape: [70, 70, 74],
	control: [80, 58, 110],
	quant: [105, 85, 35],
	constant: [58, 58, 60],
	other: [64, 64, 68],
	module: [72, 64, 44],
	io: [40, 40, 44],
};

export function theme(dark: boolean): Theme {
	return dark
		? { background: [30, 30, 30], foreground: [220, 220, 220], muted: [150, 150, 150], edge: [120, 120, 128], group: [40, 40, 44], groupBorder: [90, 90, 96], selection: [0, 122, 204], current: [255, 204, 0], breakpoint: [229, 20, 0], dark, fills: DARK_FILLS }
		: { background: [255, 255, 255], foreground: [30, 30, 30], muted: [110, 110, 110], edge: [150, 150, 158], group: [248, 248, 250], groupBorder: [200, 200, 206], selection: [0, 102, 204], current: [230, 160, 0], breakpoint: [229, 20, 0], dark, fills: LIGHT_FILLS };
}

/** The colour as CSS. */
export function css(c: RGB, alpha = 1): string {
	return alpha === 1 ? `rgb(${c[0]},${c[1]},${c[2]})` : `rgba(${c[0]},${c[1]},${c[2]},${alpha})`;
}

/** Black or white, whichever reads better on `c`. */
export function textOn(c: RGB): RGB {
	return 0.299 * c[0] + 0.587 * c[1] + 0.114 * c[2] > 140 ? [20, 20, 20] : [245, 245, 245];
}
