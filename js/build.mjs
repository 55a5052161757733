// Bundle every widget entry (each top-level js/*.js) into src/nbviz/static/<name>.js.
//
//   node build.mjs          one build (what `make js` and the Python build run)
//   node build.mjs --watch  rebuild on change while developing a widget
//
// Shared code lives in js/lib/ and is bundled into each entry that imports it.
import { readdirSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import * as esbuild from "esbuild";

const here = dirname(fileURLToPath(import.meta.url));
const outdir = resolve(here, "..", "src", "nbviz", "static");

const entryPoints = readdirSync(here)
  .filter((name) => name.endsWith(".js"))
  .sort()
  .map((name) => join(here, name));

if (entryPoints.length === 0) {
  console.error(`nbviz build: no widget entries (*.js) found in ${here}`);
  process.exit(1);
}

/** @type {import("esbuild").BuildOptions} */
const options = {
  entryPoints,
  outdir,
  bundle: true,
  format: "esm",
  minify: true,
  target: ["es2020"],
  logLevel: "info",
};

if (process.argv.includes("--watch")) {
  const ctx = await esbuild.context(options);
  await ctx.watch();
} else {
  await esbuild.build(options);
}
