// highlight.js: a small syntax highlighter for Python and C/C++/CUDA. It cuts the source into
// tokens (comments, strings, numbers, keywords, types, preprocessor lines, decorators) with a
// list of sticky regular expressions tried in order, and returns text nodes and <span class=
// "tok-KIND"> elements: the source stays text, never markup.
import { h } from "./dom.js";

function words(list) {
  return new Set(list.split(/\s+/).filter(Boolean));
}

const PY_KEYWORDS = words(`False None True and as assert async await break class continue def
  del elif else except finally for from global if import in is lambda nonlocal not or pass raise
  return try while with yield match case self`);
const PY_TYPES = words(`int float bool str bytes list dict tuple set object type len range print
  super isinstance torch nn F Tensor Module`);
const C_KEYWORDS = words(`auto break case catch class const constexpr continue default delete do
  else enum explicit extern for friend goto if inline namespace new noexcept operator private
  protected public register return sizeof static static_assert static_cast reinterpret_cast
  const_cast struct switch template this throw try typedef typename union using virtual
  volatile while true false nullptr __global__ __device__ __host__ __shared__ __constant__
  __restrict__ __forceinline__ __launch_bounds__ __syncthreads __syncwarp`);
const C_TYPES = words(`void bool char short int long float double signed unsigned size_t
  int8_t int16_t int32_t int64_t uint8_t uint16_t uint32_t uint64_t half __half __nv_bfloat16
  float2 float4 int2 int4 dim3 cudaStream_t cudaError_t std threadIdx blockIdx blockDim gridDim
  warpSize`);

// [kind, sticky regexp, {lineStart}?]; "word" tokens are looked up in the language's keyword
// and type sets; a lineStart rule matches only after nothing but blanks on its line.
const PYTHON = {
  rules: [
    ["com", /#[^\n]*/y],
    ["str", /[rRbBfFuU]{0,2}("""|''')[\s\S]*?(?:\1|$)/y],
    ["str", /[rRbBfFuU]{0,2}("|')(?:\\.|(?!\1)[^\\\n])*\1?/y],
    ["dec", /@[A-Za-z_][\w.]*/y],
    ["num", /(?:0[xX][\da-fA-F_]+|(?:\d[\d_]*\.?[\d_]*|\.\d[\d_]*)(?:[eE][+-]?\d+)?j?)/y],
    ["word", /[A-Za-z_]\w*/y],
  ],
  keywords: PY_KEYWORDS,
  types: PY_TYPES,
};

const C = {
  rules: [
    ["com", /\/\/[^\n]*/y],
    ["com", /\/\*[\s\S]*?(?:\*\/|$)/y],
    ["pre", /#[ \t]*[a-z]+(?:[ \t]*<[^>\n]*>)?/y, { lineStart: true }],
    ["str", /"(?:\\.|[^"\\\n])*"?/y],
    ["str", /'(?:\\.|[^'\\\n])*'?/y],
    ["num", /(?:0[xX][\da-fA-F']+|(?:\d[\d']*\.?[\d']*|\.\d+)(?:[eE][+-]?\d+)?)[uUlLfF]*/y],
    ["word", /[A-Za-z_]\w*/y],
  ],
  keywords: C_KEYWORDS,
  types: C_TYPES,
};

const PLAIN = /[^A-Za-z_\d"'#/@.]+|[\s\S]/y;

// The language of a file name: "python", "c" or null (plain text).
export function languageOf(name) {
  if (/\.py$/i.test(name)) return "python";
  if (/\.(cu|cuh|c|cc|cpp|cxx|h|hh|hpp)$/i.test(name)) return "c";
  return null;
}

// [[kind | null, text], ...] covering the whole source.
export function tokens(source, language) {
  const lang = language === "python" ? PYTHON : language === "c" ? C : null;
  if (!lang) return [[null, source]];
  const out = [];
  let pos = 0;
  const push = (kind, text) => {
    const last = out[out.length - 1];
    if (last && last[0] === kind) last[1] += text;
    else out.push([kind, text]);
  };
  while (pos < source.length) {
    let matched = false;
    for (const [kind, re, opts] of lang.rules) {
      if (opts?.lineStart && !/^[ \t]*$/.test(source.slice(source.lastIndexOf("\n", pos - 1) + 1, pos))) continue;
      re.lastIndex = pos;
      const m = re.exec(source);
      if (!m || m[0].length === 0) continue;
      let k = kind;
      if (kind === "word") k = lang.keywords.has(m[0]) ? "kw" : lang.types.has(m[0]) ? "type" : null;
      push(k, m[0]);
      pos += m[0].length;
      matched = true;
      break;
    }
    if (!matched) {
      PLAIN.lastIndex = pos;
      const m = PLAIN.exec(source);
      push(null, m[0]);
      pos += m[0].length;
    }
  }
  return out;
}

// A <pre class="code"><code> block of the highlighted source.
export function codeBlock(source, language) {
  const parts = tokens(source, language).map(([kind, text]) =>
    kind ? h("span", { class: `tok-${kind}` }, text) : text,
  );
  return h("pre", { class: "code", dataset: { lang: language || "text" } }, h("code", {}, parts));
}
