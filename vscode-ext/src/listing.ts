/**
 * The graph listing of a model: a read-only document of the language `onnx-listing` that takes
 * gutter breakpoints. It is the file `<model>.onnxtxt` beside the model, the path the adapter
 * reports as the frames' source, so breakpoints set before a session are honoured. Where the
 * model's folder is not writable, the file goes into the extension's storage instead and the
 * launch configuration tells the adapter its path (`listingPath`, see PROTOCOL.md).
 */
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { promises as fs } from 'node:fs';
import * as path from 'node:path';
import * as vscode from 'vscode';
import { listingPathFor } from './configuration';
import { hoverExpression, parseNodeLine, valueNameAt } from './listingText';

export const LANGUAGE_ID = 'onnx-listing';

/** Runs `python -m graph_dap listing MODEL` and returns the listing's text. */
export function produceListing(python: string, model: string): Promise<string> {
	return new Promise((resolve, reject) => {
		execFile(
			python,
			['-m', 'graph_dap', 'listing', model],
			{ maxBuffer: 512 * 1024 * 1024, timeout: 120_000, windowsHide: true },
			(error, stdout, stderr) => {
				if (!error) {
					resolve(stdout);
					return;
				}
				const line = String(stderr).trim().split('\n').slice(-1)[0];
				reject(new Error(line || error.message));
			},
		);
	});
}

/** Writes `text` to `file` unless it already holds it (an open editor is then not reloaded). */
async function writeIfChanged(file: string, text: string): Promise<void> {
	const old = await fs.readFile(file, 'utf8').catch(() => undefined);
	if (old !== text) {
		await fs.writeFile(file, text, 'utf8');
	}
}

const NOT_WRITABLE = new Set(['EACCES', 'EPERM', 'EROFS']);

/** Where listings are written, and which models' listings are not beside them. */
export class ListingFiles {
	private readonly moved = new Map<string, string>();

	/** @param storage a writable folder of the extension's (its global storage). */
	constructor(private readonly storage: string) {}

	/** The listing's path when it is not the default `<model>.onnxtxt` (the folder was not writable). */
	movedListing(model: string): string | undefined {
		return this.moved.get(model);
	}

	/** The model whose listing is the file `listing` in the extension's storage, if any. */
	modelOf(listing: string): string | undefined {
		for (const [model, file] of this.moved) {
			if (file === listing) {
				return model;
			}
		}
		return undefined;
	}

	/** Produces the listing of `model`, writes it, and returns the file's path. */
	async write(python: string, model: string): Promise<string> {
		const text = await produceListing(python, model);
		const beside = listingPathFor(model);
		try {
			await writeIfChanged(beside, text);
			this.moved.delete(model);
			return beside;
		} catch (e) {
			if (!NOT_WRITABLE.has((e as NodeJS.ErrnoException).code ?? '')) {
				throw e;
			}
		}
		const key = createHash('sha256').update(model).digest('hex').slice(0, 16);
		const file = path.join(this.storage, 'listings', key, path.basename(beside));
		await fs.mkdir(path.dirname(file), { recursive: true });
		await writeIfChanged(file, text);
		this.moved.set(model, file);
		return file;
	}

	/** Opens the listing of `model` in an editor. */
	async show(python: string, model: string, viewColumn?: vscode.ViewColumn): Promise<vscode.TextEditor> {
		let doc = await vscode.workspace.openTextDocument(vscode.Uri.file(await this.write(python, model)));
		if (doc.languageId !== LANGUAGE_ID) {
			doc = await vscode.languages.setTextDocumentLanguage(doc, LANGUAGE_ID);
		}
		return vscode.window.showTextDocument(doc, { viewColumn, preview: false });
	}
}

/**
 * The default editor of `*.onnx` files: it opens the model's listing as a text editor in its
 * place (gutter breakpoints need a text editor) and closes itself; on failure it stays and
 * says what went wrong.
 */
export class ModelEditorProvider implements vscode.CustomReadonlyEditorProvider {
	static readonly viewType = 'graphDap.model';

	constructor(
		private readonly python: (resource: vscode.Uri) => Promise<string>,
		private readonly listings: ListingFiles,
	) {}

	openCustomDocument(uri: vscode.Uri): vscode.CustomDocument {
		return { uri, dispose: () => undefined };
	}

	async resolveCustomEditor(document: vscode.CustomDocument, panel: vscode.WebviewPanel): Promise<void> {
		const model = document.uri.fsPath;
		panel.webview.html = page(`Opening the graph listing of ${model} ...`);
		try {
			const python = await this.python(document.uri);
			await this.listings.show(python, model, panel.viewColumn);
			panel.dispose();
		} catch (e) {
			const message = `graph-dap could not list ${model}: ${(e as Error).message}`;
			panel.webview.html = page(message);
			void vscode.window.showErrorMessage(message);
		}
	}
}

function page(text: string): string {
	const escaped = text.replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' })[c]!);
	return `<!DOCTYPE html><html><head><meta charset="utf-8"><meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'"></head>
<body style="font-family: var(--vscode-font-family); padding: 1em"><p>${escaped}</p></body></html>`;
}

/** Outline (nodes, nested under their subgraphs' nodes) and debug hovers for listings. */
export class ListingLanguageFeatures implements vscode.DocumentSymbolProvider, vscode.EvaluatableExpressionProvider {
	provideDocumentSymbols(document: vscode.TextDocument): vscode.DocumentSymbol[] {
		const roots: vscode.DocumentSymbol[] = [];
		const stack: { indent: number; symbol: vscode.DocumentSymbol }[] = [];
		for (let i = 0; i < document.lineCount; i++) {
			const line = document.lineAt(i);
			const node = parseNodeLine(line.text);
			if (!node) {
				continue;
			}
			const symbol = new vscode.DocumentSymbol(node.nodeId || node.outputs.join(', '), node.opType, vscode.SymbolKind.Function, line.range, line.range);
			while (stack.length && stack[stack.length - 1].indent >= node.indent) {
				stack.pop();
			}
			(stack.length ? stack[stack.length - 1].symbol.children : roots).push(symbol);
			stack.push({ indent: node.indent, symbol });
		}
		return roots;
	}

	provideEvaluatableExpression(document: vscode.TextDocument, position: vscode.Position): vscode.EvaluatableExpression | undefined {
		const hit = valueNameAt(document.lineAt(position.line).text, position.character);
		if (!hit) {
			return undefined;
		}
		return new vscode.EvaluatableExpression(new vscode.Range(position.line, hit.start, position.line, hit.end), hoverExpression(hit.name));
	}
}
