// The body of an async function: arguments are globals ($text) and fields of `args`.
const slug = $text
  .normalize('NFKD')
  .replace(/[\u0300-\u036f]/g, '')
  .toLowerCase()
  .replace(/[^a-z0-9]+/g, '-')
  .replace(/^-+|-+$/g, '');
return { slug: slug.slice(0, args.max_length ?? 60).replace(/-+$/, '') };
