/**
 * Swagger UI's two files as Workers text modules (a wrangler `Text` rule, or Miniflare's `Text`
 * modules here): the module's default export is the file's text.
 */
declare module 'swagger-ui-dist/swagger-ui-bundle.js' {
  const text: string;
  export default text;
}

declare module 'swagger-ui-dist/swagger-ui.css' {
  const text: string;
  export default text;
}
