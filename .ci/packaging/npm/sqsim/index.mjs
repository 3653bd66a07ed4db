// ESM entry: the same functions as the CommonJS one (index.js), so `import` and `require`
// share one module state (the set of running servers).
import sqsim from "./index.js";

export const { startSqsim, binaryPath } = sqsim;
export default sqsim;
