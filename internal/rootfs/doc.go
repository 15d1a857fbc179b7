// Package rootfs builds and keeps the root file systems of VM-like tiers (today the heavy tier; a
// microVM tier would boot the same trees), outside any one tier so none imports another. An image
// is a recipe (a Debian suite and a package list, see package images) built with debootstrap from
// the machine's configured Debian mirror, with the guest agent added, and cached under a hash of
// the recipe: a second build of an unchanged recipe only refreshes the agent (instant).
//
// Layout under the store's directory (the heavy tier's is DATA_DIR/heavy/images):
//
//	NAME/HASH/rootfs         the root file system (sandboxes write to a memory overlay, never here)
//	NAME/HASH/manifest.json  what is in it: Debian packages and Python distributions with versions,
//	                         read from the image itself after the build
//	NAME/current             symlink to the HASH the recipe last built
//	NAME/.build-*            a build in progress (removed when it fails)
package rootfs
