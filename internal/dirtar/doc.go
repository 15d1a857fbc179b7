// Package dirtar copies a directory tree (a volume's files) to and from a tar stream, keeping
// what a restored gVisor sandbox relies on: paths, sizes, modes, owners and nanosecond
// modification times (PAX), symbolic links as links. Both ways go through an os.Root, so neither a
// link in the tree nor an entry of the tar leads outside the directory. ext4's lost+found at the
// root is left out and left alone.
package dirtar
