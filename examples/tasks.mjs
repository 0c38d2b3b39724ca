// A module for the README's tour of pushed code (docs/code-mount.md): no imports, so it runs from
// a mounted tree on a worker that has no copy of this repository.
export function square(x) {
  return x * x;
}
