/*
 * fs layer: inodes, directories, xattrs, symlinks and path resolution.
 *
 * Directory entries are indexed twice: DIR_ITEM keyed by the name hash (for
 * lookup; several names may share a hash, so an item holds a list) and
 * DIR_INDEX keyed by a per-directory sequence (readdir order, and the stable
 * offset we give readdir).  Xattrs are XATTR_ITEMs keyed by the name hash,
 * laid out like dir items with the value after the name.
 *
 * Items reached here passed the tree checker, but entry lists are still
 * walked with explicit bounds so a checker gap cannot become an overread.
 */
#include "fs.h"

#include "base/base.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

void ubt_inode_leaf_facts(const struct ubt_path *path, uint64_t ino, bool *noxattr,
			  bool *noextents)
{
	const struct ubt_eb *leaf = path->nodes[0];
	int i, n = (int)ubt_eb_nritems(leaf);
	int xattr = -1, extents = -1;	/* -1 undecided, 0 has some, 1 has none */

	for (i = path->slots[0] + 1; i < n && extents < 0; i++) {
		struct btrfs_key k;
		ubt_eb_item_key(leaf, i, &k);
		bool past = k.objectid != ino;
		if (xattr < 0 && (past || k.type >= BTRFS_XATTR_ITEM_KEY))
			xattr = !past && k.type == BTRFS_XATTR_ITEM_KEY ? 0 : 1;
		if (past || k.type >= BTRFS_EXTENT_DATA_KEY)
			extents = !past && k.type == BTRFS_EXTENT_DATA_KEY ? 0 : 1;
	}
	/* Past the leaf lies the next leaf's first key (the separator at the
	 * level where the way to it turns): undecided there means unknown,
	 * except in the tree's last leaf; and a leaf reaching its separator
	 * breaks the tree's order, so nothing is known from it. */
	int l = ubt_path_next_level(path);
	if (l == 0) {
		xattr = xattr != 0;
		extents = extents != 0;
	} else if (n > 0) {
		struct btrfs_key last, sep;
		ubt_eb_item_key(leaf, n - 1, &last);
		ubt_eb_node_key(path->nodes[l], path->slots[l] + 1, &sep);
		if (btrfs_comp_keys(&last, &sep) >= 0)
			xattr = extents = 0;
	}
	*noxattr = xattr == 1;
	*noextents = extents == 1;
}

static int inode_search(struct ubt_fs *fs, const struct ubt_subvol *sv, uint64_t ino,
			struct btrfs_inode_item *item, bool *noxattr, bool *noextents)
{
	struct btrfs_key key = { ino, BTRFS_INODE_ITEM_KEY, 0 };
	struct ubt_path path;
	int ret;

	ubt_path_init(&path);
	ret = ubt_search_slot(&fs->tree, &sv->root, &key, &path);
	if (ret == 0) {
		uint32_t size = ubt_eb_item_size(path.nodes[0], path.slots[0]);
		if (size < sizeof(struct btrfs_inode_item)) {
			ret = UBT_CORRUPT(path.nodes[0]->start, "inode %llu item too small",
					  (unsigned long long)ino);
		} else {
			memcpy(item, ubt_eb_item_data(path.nodes[0], path.slots[0]), sizeof(*item));
			ubt_inode_leaf_facts(&path, ino, noxattr, noextents);
		}
	} else if (ret == 1) {
		ret = -ENOENT;
	}
	ubt_path_release(&fs->tree, &path);
	return ret;
}

/* Does the tree hold an item (ino, type, *)? 1 yes, 0 no, <0 error. */
static int has_item_type(struct ubt_fs *fs, const struct ubt_subvol *sv, uint64_t ino,
			 uint8_t type)
{
	struct btrfs_key min = { ino, type, 0 }, max = { ino, type, UINT64_MAX };
	struct ubt_iter it;

	ubt_iter_start(&it, &fs->tree, &sv->root, &min, &max);
	int ret = ubt_iter_next(&it);
	ubt_iter_end(&it);
	return ret == 0 ? 1 : ret == 1 ? 0 : ret;
}

/* UBTRFS_ICACHE_CHECK: the cache holds that the inode lacks every item of
 * `type`; the tree must agree.  0 or -EUCLEAN (logged). */
static int check_none(struct ubt_fs *fs, const struct ubt_subvol *sv, uint64_t ino,
		      uint8_t type)
{
	int ret = has_item_type(fs, sv, ino, type);
	if (ret <= 0)
		return ret;	/* agrees, or the tree could not be read */
	ubt_log(UBT_LOG_ERROR,
		"inode cache: subvolume %llu inode %llu has items of type %u the cache says "
		"it lacks (%d)", (unsigned long long)sv->id, (unsigned long long)ino, type, ret);
	return -EUCLEAN;
}

/* UBTRFS_ICACHE_CHECK: a cached inode against its tree. */
static int check_cached(struct ubt_fs *fs, const struct ubt_subvol *sv, uint64_t ino,
			const struct btrfs_inode_item *item, bool nx, bool ne)
{
	struct btrfs_inode_item fresh;
	bool fx, fe;
	int ret = inode_search(fs, sv, ino, &fresh, &fx, &fe);

	if (ret && ret != -ENOENT)
		return ret;	/* the tree could not be read: not the cache's fault */
	if (ret || memcmp(&fresh, item, sizeof(fresh)) != 0) {
		ubt_log(UBT_LOG_ERROR,
			"inode cache: subvolume %llu inode %llu differs from its tree (%d)",
			(unsigned long long)sv->id, (unsigned long long)ino, ret);
		return -EUCLEAN;
	}
	if (nx)
		ret = check_none(fs, sv, ino, BTRFS_XATTR_ITEM_KEY);
	if (!ret && ne)
		ret = check_none(fs, sv, ino, BTRFS_EXTENT_DATA_KEY);
	return ret;
}

int ubt_inode_read_facts(struct ubt_fs *fs, const struct ubt_subvol *sv, uint64_t ino,
			 struct ubt_inode *out, bool *noxattr, bool *noextents)
{
	bool nx = false, ne = false;
	int ret = 0;

	out->ino = ino;
	out->sv = sv;
	if (ino == BTRFS_EMPTY_SUBVOL_DIR_OBJECTID) {
		ubt_placeholder_inode(sv, out);
	} else if (ubt_icache_get(fs, sv->id, ino, &out->item, &nx, &ne)) {
		if (ubt_icache_checking(fs))
			ret = check_cached(fs, sv, ino, &out->item, nx, ne);
	} else {
		ret = inode_search(fs, sv, ino, &out->item, &nx, &ne);
		if (!ret)
			ubt_icache_put(fs, sv->id, ino, &out->item, nx, ne);
	}
	if (noxattr)
		*noxattr = nx;
	if (noextents)
		*noextents = ne;
	return ret;
}

int ubt_inode_read(struct ubt_fs *fs, const struct ubt_subvol *sv, uint64_t ino,
		   struct ubt_inode *out)
{
	return ubt_inode_read_facts(fs, sv, ino, out, NULL, NULL);
}

int ubt_inode_no_xattrs(struct ubt_fs *fs, const struct ubt_subvol *sv, uint64_t ino)
{
	if (!ubt_icache_no_xattrs(fs, sv->id, ino))
		return 0;
	if (ubt_icache_checking(fs)) {
		int ret = check_none(fs, sv, ino, BTRFS_XATTR_ITEM_KEY);
		if (ret)
			return ret;
	}
	return 1;
}

/*
 * Walk the entries of a DIR_ITEM/DIR_INDEX/XATTR_ITEM body.  fn gets each
 * entry; returning non-zero stops the walk with that value.
 */
static int walk_dir_entries(const uint8_t *p, uint32_t size, uint64_t where,
			    int (*fn)(void *ctx, const struct btrfs_dir_item *di, const char *name,
				      const uint8_t *data),
			    void *ctx)
{
	uint32_t off = 0;

	while (off < size) {
		if (size - off < sizeof(struct btrfs_dir_item))
			return UBT_CORRUPT(where, "dir item entry header truncated");
		const struct btrfs_dir_item *di = (const void *)(p + off);
		uint32_t nl = btrfs_dir_name_len(di), dl = btrfs_dir_data_len(di);
		if (nl + dl > size - off - sizeof(*di))
			return UBT_CORRUPT(where, "dir item entry overruns its item");
		const char *name = (const char *)(p + off + sizeof(*di));
		int r = fn(ctx, di, name, (const uint8_t *)name + nl);
		if (r)
			return r;
		off += (uint32_t)sizeof(*di) + nl + dl;
	}
	return 0;
}

struct name_match {
	const char *name;
	size_t len;
	struct btrfs_key location;
	uint8_t type;
	const uint8_t *data;
	uint16_t data_len;
};

static int match_name(void *ctx, const struct btrfs_dir_item *di, const char *name,
		      const uint8_t *data)
{
	struct name_match *m = ctx;

	if (btrfs_dir_name_len(di) != m->len || memcmp(name, m->name, m->len))
		return 0;
	btrfs_disk_key_to_cpu(&m->location, &di->location);
	m->type = btrfs_dir_type(di);
	m->data = data;
	m->data_len = btrfs_dir_data_len(di);
	return 1;
}

int ubt_dir_lookup(struct ubt_fs *fs, const struct ubt_inode *dir, const char *name, size_t len,
		   struct btrfs_key *location, uint8_t *type)
{
	struct btrfs_key key = { dir->ino, BTRFS_DIR_ITEM_KEY, ubt_name_hash(name, len) };
	struct name_match m = { name, len, { 0, 0, 0 }, 0, NULL, 0 };
	struct ubt_path path;
	int ret;

	if (len == 0 || len > BTRFS_NAME_LEN)
		return len ? -ENAMETOOLONG : -ENOENT;
	ubt_path_init(&path);
	ret = ubt_search_slot(&fs->tree, &dir->sv->root, &key, &path);
	if (ret == 0) {
		ret = walk_dir_entries(ubt_eb_item_data(path.nodes[0], path.slots[0]),
				       ubt_eb_item_size(path.nodes[0], path.slots[0]),
				       path.nodes[0]->start, match_name, &m);
		if (ret == 1) {
			*location = m.location;
			*type = m.type;
			ret = 0;
		} else if (ret == 0) {
			ret = -ENOENT;
		}
	} else if (ret == 1) {
		ret = -ENOENT;
	}
	ubt_path_release(&fs->tree, &path);
	return ret;
}

struct index_entry {
	struct ubt_dirent *e;
};

static int take_index_entry(void *ctx, const struct btrfs_dir_item *di, const char *name,
			    const uint8_t *data)
{
	struct ubt_dirent *e = ctx;
	(void)data;

	e->name_len = btrfs_dir_name_len(di);
	if (e->name_len > BTRFS_NAME_LEN)
		e->name_len = BTRFS_NAME_LEN;
	memcpy(e->name, name, e->name_len);
	e->name[e->name_len] = 0;
	btrfs_disk_key_to_cpu(&e->location, &di->location);
	e->type = btrfs_dir_type(di);
	return 1;	/* a DIR_INDEX holds exactly one entry */
}

int ubt_dir_iterate(struct ubt_fs *fs, const struct ubt_inode *dir, uint64_t start,
		    int (*fn)(void *ctx, const struct ubt_dirent *e), void *ctx)
{
	struct btrfs_key min = { dir->ino, BTRFS_DIR_INDEX_KEY, start };
	struct btrfs_key max = { dir->ino, BTRFS_DIR_INDEX_KEY, (uint64_t)-1 };
	struct ubt_dirent e;
	struct ubt_iter it;
	int ret;

	ubt_iter_start(&it, &fs->tree, &dir->sv->root, &min, &max);
	while ((ret = ubt_iter_next(&it)) == 0) {
		memset(&e, 0, sizeof(e));
		e.index = it.key.offset;
		ret = walk_dir_entries(it.data, it.size, it.leaf->start, take_index_entry, &e);
		if (ret < 0)
			break;
		if (ret == 0)
			continue;	/* empty item: nothing to report */
		ret = fn(ctx, &e);
		if (ret)
			break;
	}
	ubt_iter_end(&it);
	return ret == 1 ? 0 : ret;
}

int ubt_readlink(struct ubt_fs *fs, const struct ubt_inode *in, char *buf, size_t *len)
{
	uint64_t size = btrfs_inode_size(&in->item);

	if (!S_ISLNK(ubt_inode_mode(in)))
		return -EINVAL;
	if (size > *len)
		return -ENAMETOOLONG;
	ssize_t n = ubt_file_read(fs, in, buf, (size_t)size, 0);
	if (n < 0)
		return (int)n;
	*len = (size_t)n;
	return 0;
}

/* ---- xattrs ------------------------------------------------------------ */

struct xattr_list {
	char *buf;
	size_t size, used;
	int err;
};

static int add_xattr_name(void *ctx, const struct btrfs_dir_item *di, const char *name,
			  const uint8_t *data)
{
	struct xattr_list *l = ctx;
	size_t n = btrfs_dir_name_len(di);
	(void)data;

	if (l->buf && l->size) {
		if (l->used + n + 1 > l->size) {
			l->err = -ERANGE;
			return 1;
		}
		memcpy(l->buf + l->used, name, n);
		l->buf[l->used + n] = 0;
	}
	l->used += n + 1;
	return 0;
}

ssize_t ubt_xattr_list(struct ubt_fs *fs, const struct ubt_subvol *sv, uint64_t ino, char *buf,
		       size_t size)
{
	/* Start at the INODE_ITEM, which sorts before every other item of the
	 * inode: seeing it proves the inode exists, in the same walk. */
	struct btrfs_key min = { ino, BTRFS_INODE_ITEM_KEY, 0 };
	struct btrfs_key max = { ino, BTRFS_XATTR_ITEM_KEY, (uint64_t)-1 };
	struct xattr_list l = { buf, size, 0, 0 };
	struct ubt_iter it;
	bool seen_inode = false;
	int ret;

	if (ino == BTRFS_EMPTY_SUBVOL_DIR_OBJECTID)
		return 0;
	ubt_iter_start(&it, &fs->tree, &sv->root, &min, &max);
	while ((ret = ubt_iter_next(&it)) == 0) {
		if (!seen_inode) {
			if (it.key.type != BTRFS_INODE_ITEM_KEY || it.key.offset != 0)
				break;
			seen_inode = true;
		}
		if (it.key.type != BTRFS_XATTR_ITEM_KEY)
			continue;
		ret = walk_dir_entries(it.data, it.size, it.leaf->start, add_xattr_name, &l);
		if (ret < 0 || l.err)
			break;
	}
	ubt_iter_end(&it);
	if (ret < 0)
		return ret;
	if (!seen_inode)
		return -ENOENT;
	if (l.err)
		return l.err;
	return (ssize_t)l.used;
}

/*
 * After a search for (ino, XATTR_ITEM, hash) that found nothing: does the
 * inode exist?  Its INODE_ITEM sorts first among its items, so the inode
 * exists exactly when the item just before the insertion point belongs to
 * it (checked in the leaf at hand when possible, else by a lookup).
 */
static int inode_exists_before(struct ubt_fs *fs, const struct ubt_subvol *sv, uint64_t ino,
			       const struct ubt_path *path)
{
	if (path->slots[0] > 0) {
		struct btrfs_key k;
		ubt_eb_item_key(path->nodes[0], path->slots[0] - 1, &k);
		return k.objectid == ino ? 0 : -ENOENT;
	}
	struct ubt_inode in;
	return ubt_inode_read(fs, sv, ino, &in);
}

ssize_t ubt_xattr_get(struct ubt_fs *fs, const struct ubt_subvol *sv, uint64_t ino,
		      const char *name, void *buf, size_t size)
{
	size_t len = strlen(name);
	struct name_match m = { name, len, { 0, 0, 0 }, 0, NULL, 0 };
	struct ubt_path path;
	ssize_t ret;

	if (ino == BTRFS_EMPTY_SUBVOL_DIR_OBJECTID)
		return -ENODATA;
	ret = ubt_inode_no_xattrs(fs, sv, ino);
	if (ret)
		return ret > 0 ? -ENODATA : ret;
	/* The name's hash only when the items must be searched. */
	struct btrfs_key key = { ino, BTRFS_XATTR_ITEM_KEY, ubt_name_hash(name, len) };
	ubt_path_init(&path);
	ret = ubt_search_slot(&fs->tree, &sv->root, &key, &path);
	if (ret == 0) {
		ret = walk_dir_entries(ubt_eb_item_data(path.nodes[0], path.slots[0]),
				       ubt_eb_item_size(path.nodes[0], path.slots[0]),
				       path.nodes[0]->start, match_name, &m);
		if (ret == 1) {
			if (size == 0) {
				ret = m.data_len;
			} else if (size < m.data_len) {
				ret = -ERANGE;
			} else {
				memcpy(buf, m.data, m.data_len);
				ret = m.data_len;
			}
		} else if (ret == 0) {
			ret = -ENODATA;
		}
	} else if (ret == 1) {
		ret = inode_exists_before(fs, sv, ino, &path);
		if (ret == 0)
			ret = -ENODATA;
	}
	ubt_path_release(&fs->tree, &path);
	return ret;
}

/* ---- subvolume crossings and paths ------------------------------------ */

/*
 * Is `child` really a subvolume mounted at (dir, name) of subvolume `parent`?
 * The kernel checks the ROOT_REF; a snapshot of a subvolume that contained
 * another subvolume has the entry but no ROOT_REF, and shows a placeholder.
 */
static int root_ref_matches(struct ubt_fs *fs, uint64_t parent, uint64_t child, uint64_t dir,
			    const char *name, size_t len)
{
	struct btrfs_key key = { parent, BTRFS_ROOT_REF_KEY, child };
	struct ubt_path path;
	int ret;

	ubt_path_init(&path);
	ret = ubt_search_slot(&fs->tree, &fs->root_tree, &key, &path);
	if (ret == 0) {
		const uint8_t *p = ubt_eb_item_data(path.nodes[0], path.slots[0]);
		uint32_t size = ubt_eb_item_size(path.nodes[0], path.slots[0]);
		const struct btrfs_root_ref *rr = (const void *)p;
		ret = 0;
		if (size >= sizeof(*rr) && btrfs_root_ref_dirid(rr) == dir &&
		    btrfs_root_ref_name_len(rr) == len && size - sizeof(*rr) >= len &&
		    !memcmp(p + sizeof(*rr), name, len))
			ret = 1;
	} else if (ret == 1) {
		ret = 0;
	}
	ubt_path_release(&fs->tree, &path);
	return ret;
}

void ubt_placeholder_inode(const struct ubt_subvol *sv, struct ubt_inode *out)
{
	memset(out, 0, sizeof(*out));
	out->ino = BTRFS_EMPTY_SUBVOL_DIR_OBJECTID;
	out->sv = sv;
	btrfs_set_inode_mode(&out->item, S_IFDIR | 0755);
	btrfs_set_inode_nlink(&out->item, 1);
	/* The kernel stamps it with the current time; the containing
	 * subvolume's creation time is our stable stand-in. */
	const struct btrfs_timespec *t = btrfs_root_otime(&sv->item);
	memcpy(&out->item.atime, t, sizeof(*t));
	memcpy(&out->item.mtime, t, sizeof(*t));
	memcpy(&out->item.ctime, t, sizeof(*t));
	memcpy(&out->item.otime, t, sizeof(*t));
}

int ubt_dir_entry_inode(struct ubt_fs *fs, const struct ubt_inode *dir, const char *name,
			size_t len, const struct btrfs_key *location, struct ubt_inode *out)
{
	if (location->type == BTRFS_INODE_ITEM_KEY)
		return ubt_inode_read(fs, dir->sv, location->objectid, out);
	if (location->type != BTRFS_ROOT_ITEM_KEY)
		return UBT_CORRUPT(0, "directory %llu entry '%.*s' points to key type %u",
				   (unsigned long long)dir->ino, (int)len, name, location->type);
	int ret = root_ref_matches(fs, dir->sv->id, location->objectid, dir->ino, name, len);
	if (ret < 0)
		return ret;
	const struct ubt_subvol *sv;
	if (ret == 1)
		ret = ubt_fs_subvol(fs, location->objectid, &sv);
	else
		ret = -ENOENT;
	if (ret == -ENOENT) {
		ubt_placeholder_inode(dir->sv, out);
		return 0;
	}
	if (ret)
		return ret;
	return ubt_inode_read(fs, sv, btrfs_root_root_dirid(&sv->item), out);
}

int ubt_path_lookup(struct ubt_fs *fs, const struct ubt_subvol *sv, const char *path,
		    struct ubt_inode *out)
{
	struct ubt_inode cur;
	int ret = ubt_inode_read(fs, sv, btrfs_root_root_dirid(&sv->item), &cur);

	while (ret == 0 && *path) {
		while (*path == '/')
			path++;
		if (!*path)
			break;
		const char *end = strchr(path, '/');
		size_t len = end ? (size_t)(end - path) : strlen(path);
		if (!S_ISDIR(ubt_inode_mode(&cur)))
			return -ENOTDIR;
		if (len == 1 && path[0] == '.') {
			path += len;
			continue;
		}
		if (len == 2 && path[0] == '.' && path[1] == '.')
			return -EINVAL;	/* callers pass normalised paths */
		struct btrfs_key loc;
		uint8_t type;
		ret = ubt_dir_lookup(fs, &cur, path, len, &loc, &type);
		if (ret)
			return ret;
		struct ubt_inode next;
		ret = ubt_dir_entry_inode(fs, &cur, path, len, &loc, &next);
		if (ret)
			return ret;
		cur = next;
		path += len;
	}
	if (ret == 0)
		*out = cur;
	return ret;
}
