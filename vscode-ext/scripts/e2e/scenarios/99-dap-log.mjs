// The DAP traffic that VS Code really sent and received in the first (F5) session, as the extension's
// tracker logged it: the launch, the breakpoint set before configurationDone, the stop, the frame, the
// tensor viewer's requests, the end.

import { join } from 'node:path';

import { check, readDapLog, sleep } from '../helpers.mjs';

export const name = 'dap-log';

export async function run({ server, ws }) {
	await sleep(1500);
	const model = join(ws, 'nan_demo.onnx');
	const listing = join(ws, 'nan_demo.onnxtxt');
	const { files, messages } = readDapLog(server.dirs.data);
	if (!check(files.length > 0 && messages.length > 0, `the DAP log is on disk (${files.length} file, ${messages.length} messages)`)) return;
	// The F5 session's messages (the first session; later ones are the noDebug and TCP runs).
	const f5 = messages.find((m) => m.dir === '-->' && m.msg.command === 'launch')?.session;
	const requests = messages.filter((m) => m.session === f5 && m.dir === '-->' && m.msg.type === 'request').map((m) => m.msg);
	const fromAdapter = messages.filter((m) => m.session === f5 && m.dir === '<--').map((m) => m.msg);
	const response = (req) => fromAdapter.find((m) => m.type === 'response' && m.request_seq === req.seq);
	const launch = requests.find((r) => r.command === 'launch');
	check(launch && launch.arguments.model === model && launch.arguments.type === 'graph-dap', 'launch: the F5 configuration names the model (filled without a launch.json)');
	const setBps = requests.filter((r) => r.command === 'setBreakpoints' && r.arguments.source?.path === listing);
	const firstBp = setBps[0];
	const configDone = requests.find((r) => r.command === 'configurationDone');
	check(firstBp && firstBp.arguments.breakpoints?.length === 1 && (!configDone || firstBp.seq < configDone.seq), 'setBreakpoints on the listing file before configurationDone (set before the session)');
	const bpResp = firstBp && response(firstBp);
	check(bpResp?.success && bpResp.body.breakpoints[0].verified === true, `the adapter verified it (${JSON.stringify(bpResp?.body?.breakpoints?.[0])})`);
	const stopped = fromAdapter.filter((m) => m.type === 'event' && m.event === 'stopped');
	check(stopped[0]?.body?.reason === 'breakpoint', `the first stop is the breakpoint (${stopped[0]?.body?.reason})`);
	const st = requests.find((r) => r.command === 'stackTrace');
	const frame = st && response(st)?.body?.stackFrames?.[0];
	check(frame && frame.name.startsWith('norm/std') && frame.source?.path === listing, `the top frame is norm/std in the listing file (${frame?.name}, ${frame?.source?.path}:${frame?.line})`);
	check(frame && !(frame.source?.sourceReference > 0), `the frame's source is the file itself, no sourceReference (got ${frame?.source?.sourceReference})`);
	const tv = requests.filter((r) => r.command === 'graphDap/tensorView');
	const tvOk = tv.map(response).filter((r) => r?.success);
	check(tv.length >= 2 && tvOk.length >= 1, `graphDap/tensorView requests: ${tv.length}, successful: ${tvOk.length}`);
	const body = tvOk[0]?.body;
	if (body) {
		const cells = (body.data ?? []).reduce((a, r) => a + (Array.isArray(r) ? r.length : 1), 0);
		check(body.name === 'norm_out' && Array.isArray(body.shape) && Array.isArray(body.histogram?.counts), 'the tensorView body has name, shape and histogram');
		check(cells <= 256 * 256, `nothing large crossed the wire (${cells} cells)`);
	}
	check(fromAdapter.some((m) => m.type === 'event' && m.event === 'terminated'), 'the adapter sent terminated');
}
