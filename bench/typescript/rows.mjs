// The benchmarks' data: n deterministic pseudo-normal rows of d values, each L2-normalised, like real
// embeddings (the same values every run, for bench.mjs and quantization.mjs alike).
export function unitRows(n, d, seed = 42) {
  const rand = () => ((seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0) / 2 ** 32);
  const values = new Float32Array(n * d);
  for (let r = 0; r < n; r++) {
    let norm = 0;
    for (let j = 0; j < d; j++) {
      const v = rand() + rand() + rand() - 1.5;
      values[r * d + j] = v;
      norm += v * v;
    }
    norm = Math.sqrt(norm);
    for (let j = 0; j < d; j++) values[r * d + j] /= norm;
  }
  return values;
}
