// `npm pack` of the working tree as it is (src/cluster/checkout.ts), for the package and
// image tests.
export { packWorkingTree, repoCommit, REPO } from "../../src/cluster/checkout.js";
