// graph-dap's adapter driven by Microsoft's DAP test client, as VS Code would drive it.
'use strict';

const assert = require('assert');
const fs = require('fs');
const os = require('os');
const path = require('path');
const { execFileSync } = require('child_process');
const { DebugClient } = require('@vscode/debugadapter-testsupport');

const PYTHON = process.env.PYTHON || 'python3';
const LAUNCHER = path.join(__dirname, 'launcher.py');

describe('graph-dap adapter (debugadapter-testsupport)', function () {
  this.timeout(60000);
  let dc;
  let m; // what make_model.py built and computed

  before(function () {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'graph-dap-mocha-'));
    m = JSON.parse(execFileSync(PYTHON, [path.join(__dirname, 'make_model.py'), dir]).toString());
  });

  beforeEach(function () {
    dc = new DebugClient(PYTHON, LAUNCHER, 'graph-dap');
    dc.defaultTimeout = 20000;
    return dc.start();
  });

  afterEach(function () {
    return dc.stop();
  });

  it('answers initialize with its capabilities', async function () {
    const response = await dc.initializeRequest();
    assert.strictEqual(response.body.supportsConfigurationDoneRequest, true);
    assert.strictEqual(response.body.supportsStepBack, true);
    const filters = response.body.exceptionBreakpointFilters.map((f) => f.filter);
    assert.deepStrictEqual(filters, ['nan', 'inf', 'error', 'mismatch']);
  });

  it('fails a launch with a missing model and says so', async function () {
    await dc.initializeRequest();
    await assert.rejects(dc.launchRequest({ model: '/no/such/model.onnx' }), /model not found/);
  });

  it('stops at a breakpoint on a listing line', async function () {
    await dc.hitBreakpoint(
      { model: m.model, inputs: m.inputs },
      { path: m.listing, line: m.lines.add },
    );
  });

  it('steps to the next node', async function () {
    await dc.hitBreakpoint({ model: m.model, inputs: m.inputs }, { path: m.listing, line: m.lines.relu });
    await Promise.all([dc.nextRequest({ threadId: 1 }), dc.assertStoppedLocation('step', { path: m.listing, line: m.lines.add })]);
    const trace = await dc.stackTraceRequest({ threadId: 1 });
    assert.strictEqual(trace.body.stackFrames[0].name, 'add (Add)');
  });

  it('shows tensors as variables and evaluates expressions', async function () {
    await dc.hitBreakpoint({ model: m.model, inputs: m.inputs }, { path: m.listing, line: m.lines.mul });
    const trace = await dc.stackTraceRequest({ threadId: 1 });
    const frameId = trace.body.stackFrames[0].id;
    const scopes = (await dc.scopesRequest({ frameId })).body.scopes;
    assert.deepStrictEqual(
      scopes.map((s) => s.name),
      ['Inputs', 'Attributes', 'Last outputs', 'Values', 'Initializers', 'Graph outputs'],
    );
    const last = scopes.find((s) => s.name === 'Last outputs');
    const vars = (await dc.variablesRequest({ variablesReference: last.variablesReference })).body.variables;
    assert.strictEqual(vars.length, 1);
    assert.strictEqual(vars[0].name, 'a');
    assert.strictEqual(vars[0].type, 'tensor(float)');
    assert.ok(vars[0].value.startsWith('float32[1,4,8,8] min='), vars[0].value);
    const stats = (await dc.variablesRequest({ variablesReference: vars[0].variablesReference, filter: 'named' })).body.variables;
    const max = stats.find((v) => v.name === 'max');
    assert.ok(Math.abs(Number(max.value) - m.aMax) <= 1e-5 * Math.abs(m.aMax), `${max.value} vs ${m.aMax}`);
    const evaluated = await dc.evaluateRequest({ expression: 'r.min()', context: 'repl', frameId });
    assert.strictEqual(Number(evaluated.body.result), m.rMin);
    await assert.rejects(dc.evaluateRequest({ expression: 'r.min(', context: 'repl', frameId }), /never closed|syntax/);
  });

  it('runs to the end and terminates', async function () {
    await Promise.all([
      dc.configurationSequence(),
      dc.launch({ model: m.model, inputs: m.inputs }),
      dc.waitForEvent('terminated'),
    ]);
  });
});
