// Every user-visible error message, with its code. The CLI prints
// `tiercut: <message> [<code>]` on one line and exits 2 for any UserError;
// anything else is a bug and prints a stack.

export class UserError extends Error {
  constructor(readonly code: string, message: string) {
    super(message);
    this.name = 'UserError';
  }
}

const make = (code: string) => (message: string) => new UserError(code, message);

/** Names from a model file may hold anything: keep messages on one printable line. */
export const oneLine = (s: string) => s.replace(/[\x00-\x1f\x7f]/g, (c) => `\\x${c.charCodeAt(0).toString(16).padStart(2, '0')}`);
const onnxError = (code: string) => (file: string, msg: string) => new UserError(code, oneLine(`${file}: ${msg}`));

export const diag = {
  // usage and input files (1xx)
  usage: make('TC100'),
  fileNotFound: (file: string, what: string) => new UserError('TC101', `${file}: ${what} not found`),
  modelSource: make('TC102'),          // a type or syntax error in a model file: file:line:col: message
  modelShape: make('TC103'),          // a shape error while building: file:line:col: message
  unknownPreset: (file: string, preset: string, available: string[]) =>
    new UserError('TC104', `${file}: unknown preset '${preset}' (available: ${available.join(', ')})`),
  modelExport: (file: string, msg: string) => new UserError('TC105', `${file}: ${msg}`),
  badSize: (flag: string, value: string) => new UserError('TC106', `${flag}: '${value}' is not a size (use e.g. 64MB, 32GiB or plain bytes)`),
  badNumber: (flag: string, value: string, want?: string) => new UserError('TC107', want ? `${flag}: expected ${want}, got '${value}'` : `${flag}: '${value}' is not a valid number`),
  cannotWrite: make('TC108'),         // an output file (plan, trace, profile) the disk would not take
  // ONNX models (11x): each names the file; ops name the node, op_type, domain and opset
  onnxFormat: onnxError('TC110'),     // not decodable / malformed
  onnxVersion: onnxError('TC111'),    // IR version or opset out of range
  onnxOp: onnxError('TC112'),         // an op or attribute tiercut does not support
  onnxExternal: onnxError('TC113'),   // external data location rejected or missing
  onnxDim: onnxError('TC114'),        // a symbolic dim that nothing binds
  onnxTensor: onnxError('TC115'),     // tensor data disagrees with its shape
  onnxGraph: onnxError('TC116'),      // graph structure (outputs, loss, names)
  // hardware (2xx)
  unknownHardware: (name: string, available: string[]) =>
    new UserError('TC201', `unknown hardware profile '${name}' (built in: ${available.join(', ')}; or give a JSON file)`),
  badHardware: (file: string, msg: string) => new UserError('TC202', `${file}: ${msg}`),
  noCapacity: (flag: string, why: string) => new UserError('TC203', `${flag}: expected a capacity above 0 bytes, got 0: ${why}`),
  // placement (3xx)
  doesNotFit: make('TC301'),
  lpTimeLimit: make('TC302'),         // the LP that places the step ran past its time limit (compile --lp-time-limit)
  // plans (4xx)
  planFormat: (file: string, msg: string) => new UserError('TC401', `${file}: ${msg}`),
  planInvalid: (file: string, msg: string) => new UserError('TC402', `${file}: ${msg}`),
  // running (5xx)
  runtime: make('TC501'),
  data: (file: string, msg: string) => new UserError('TC502', oneLine(`${file}: ${msg}`)), // (tensor names come from the file)
  // sequence parallelism, compile --sp (6xx)
  spRanks: make('TC601'),             // P < 1, or the sequence does not cut into 2P equal zigzag chunks
  spModel: make('TC602'),             // no attention op that --sp can shard
  spOp: make('TC603'),                // an op (or input, or loss) that mixes sequence positions: file:line:col
  ringFailed: make('TC604'),          // a rank failed during a step; the others were stopped
};
