// Vitest runs only the README's Vitest example; the other files use node's own test runner.
export default { test: { include: ["**/*.vitest.mjs"] } };
