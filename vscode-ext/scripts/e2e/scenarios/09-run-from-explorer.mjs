// The explorer's context menu on the model: "Run ONNX Model" (noDebug) runs it through, breakpoint and all.

import { check, choose, exampleInExplorer, explorerMenu, launches, readDapLog, until_ } from '../helpers.mjs';

export const name = 'run-from-explorer';

export async function run({ page, server, shot }) {
	const launchesBefore = launches(server).length;
	const runItem = await explorerMenu(page, exampleInExplorer(page), 'Run ONNX Model');
	check(await page.locator('.context-view .action-menu-item', { hasText: 'Debug ONNX Model' }).first().isVisible(), 'the explorer context menu on a .onnx has "Debug ONNX Model" and "Run ONNX Model"');
	await shot('explorer-menu');
	await choose(page, runItem);
	await until_('the noDebug run to end', async () => {
		const { messages } = readDapLog(server.dirs.data);
		const launchesNow = messages.filter((m) => m.dir === '-->' && m.msg.command === 'launch');
		const last = launchesNow[launchesNow.length - 1];
		if (launchesNow.length <= launchesBefore || !last.msg.arguments.noDebug) return false;
		const after = messages.slice(messages.indexOf(last));
		return after.some((m) => m.dir === '<--' && m.msg.event === 'terminated') ? after : false;
	}, 60000).then((after) => check(!after.some((m) => m.dir === '<--' && m.msg.event === 'stopped'), 'Run ONNX Model ran to the end without stopping, breakpoint and all'));
	await page.locator('.debug-toolbar').first().waitFor({ state: 'hidden', timeout: 30000 });
}
